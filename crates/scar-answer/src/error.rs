use std::path::PathBuf;

/// Why an answer could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// No GGUF file under that name.
    #[error("chat model `{model}` not found (searched {searched})")]
    ModelNotFound {
        /// The name asked for.
        model: String,
        /// Where it was looked for.
        searched: String,
    },
    /// A folder holds more than one GGUF file.
    #[error("{dir} holds several GGUF files ({}); name one", files.join(", "))]
    AmbiguousModel {
        /// The folder.
        dir: PathBuf,
        /// The GGUF files in it.
        files: Vec<String>,
    },
    /// hf-hub could not download the model.
    #[error("downloading `{model}` failed: {reason}")]
    Download {
        /// The name asked for.
        model: String,
        /// hf-hub's message.
        reason: String,
    },
    /// The file is not a usable GGUF model.
    #[error("{path}: not a usable GGUF chat model: {reason}")]
    BadModel {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A model family this build cannot run.
    #[error(
        "{path}: architecture `{architecture}` is not supported (llama is: SmolLM2, Llama 3.x)"
    )]
    UnsupportedArchitecture {
        /// The file.
        path: PathBuf,
        /// `general.architecture` from the file.
        architecture: String,
    },
    /// The GGUF vocabulary cannot be rebuilt as a tokenizer.
    #[error("cannot build the tokenizer: {0}")]
    UnsupportedTokenizer(String),
    /// Tokenizing or decoding failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The prompt and the answer would not fit in the model's context.
    #[error(
        "the prompt has {prompt_tokens} tokens and {max_tokens} more may be generated, but the \
         model takes {context_length}: ask for fewer seeds (--k) or set a token budget"
    )]
    PromptTooLong {
        /// Tokens in the prompt.
        prompt_tokens: usize,
        /// Tokens that may be generated.
        max_tokens: usize,
        /// The model's context length.
        context_length: usize,
    },
    /// The device could not be opened.
    #[error(transparent)]
    Device(scar_embed::EmbedError),
    /// The server URL is unusable.
    #[error("server URL `{url}`: {reason}")]
    BadServerUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server failed or could not be reached.
    #[error("chat server {url}: {reason}")]
    Server {
        /// The endpoint.
        url: String,
        /// What happened.
        reason: String,
    },
    /// A tensor operation failed.
    #[error("model: {0}")]
    Candle(#[from] candle_core::Error),
    /// Reading a file failed.
    #[error(transparent)]
    Io(std::io::Error),
}

/// Results of this crate.
pub type Result<T, E = AnswerError> = std::result::Result<T, E>;
