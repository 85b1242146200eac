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
    #[error("downloading `{model}` failed")]
    Download {
        /// The name asked for.
        model: String,
        /// hf-hub's error.
        source: hf_hub::api::sync::ApiError,
    },
    /// The file is not a usable GGUF model.
    #[error("{path}: not a usable GGUF chat model: {reason}")]
    BadModel {
        /// The file.
        path: PathBuf,
        /// What is wrong, in our words.
        reason: String,
        /// The error of candle or the tokenizer that found it, if one did.
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A model family this build cannot run.
    #[error(
        "{path}: architecture `{architecture}` is not supported (these are: llama for Llama, \
         Mistral and SmolLM2; qwen2; qwen3; gemma2; gemma3; phi3)"
    )]
    UnsupportedArchitecture {
        /// The file.
        path: PathBuf,
        /// `general.architecture` from the file.
        architecture: String,
    },
    /// The GGUF vocabulary cannot be rebuilt as a tokenizer.
    #[error("cannot build the tokenizer: {reason}")]
    UnsupportedTokenizer {
        /// What is missing or unknown, in our words.
        reason: String,
        /// The error of the tokenizers crate that refused it, if one did.
        source: Option<tokenizers::Error>,
    },
    /// The answer's sentences could not be embedded to find their sources.
    #[error("embedding the answer's sentences to find their sources failed")]
    Attribution(#[source] Box<scar_embed::EmbedError>),
    /// The cited chunks could not be read back from the store to find the answer's sources.
    #[error("reading the cited chunks to find the answer's sources failed")]
    Sources(#[source] Box<scar_retrieve::RetrieveError>),
    /// The cross-encoder asked for as reranker could not be found or loaded.
    #[error("cannot load the reranker")]
    Reranker(#[source] Box<scar_embed::EmbedError>),
    /// Tokenizing or decoding failed.
    #[error("the tokenizer failed")]
    Tokenizer(#[source] tokenizers::Error),
    /// The prompt and the answer would not fit in the model's context.
    #[error(
        "the prompt has {prompt_tokens} tokens and {max_tokens} more may be generated, but the \
         model takes {context_length}: {}",
        fitting_hint(*prompt_tokens, *context_length)
    )]
    PromptTooLong {
        /// Tokens in the prompt.
        prompt_tokens: usize,
        /// Tokens that may be generated.
        max_tokens: usize,
        /// The model's context length.
        context_length: usize,
    },
    /// The device could not be opened. Transparent: the embedding crate's error already says
    /// which device, and its cause stays the source.
    #[error(transparent)]
    Device(scar_embed::EmbedError),
    /// The server URL is unusable.
    #[error("server URL `{url}`: {reason}")]
    BadServerUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it, in our words.
        reason: String,
        /// The URL parser's error, if it refused the URL.
        source: Option<url::ParseError>,
    },
    /// The server failed or could not be reached.
    #[error("chat server {url}: {reason}")]
    Server {
        /// The endpoint.
        url: String,
        /// What happened, in our words (with the server's own for an HTTP error).
        reason: String,
        /// The error of the connection or of the event parser, if one failed.
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A tensor operation failed.
    #[error("running the model failed")]
    Candle(#[from] candle_core::Error),
    /// Reading a file failed.
    #[error(transparent)]
    Io(std::io::Error),
}

/// What makes a prompt of `prompt_tokens` and its answer fit a context of `context_length`:
/// a shorter answer when the prompt fits alone, a shorter prompt when it does not.
fn fitting_hint(prompt_tokens: usize, context_length: usize) -> String {
    match context_length.checked_sub(prompt_tokens) {
        Some(room) if room > 0 => format!(
            "allow at most {room} tokens for the answer (--max-tokens), or ask for fewer seeds \
             (--k) or a token budget (--budget-tokens)"
        ),
        _ => "ask for fewer seeds (--k) or a token budget (--budget-tokens): the prompt alone \
              fills the model's context"
            .to_owned(),
    }
}

/// Results of this crate.
pub type Result<T, E = AnswerError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_too_long_names_the_fix_that_fits() {
        let answer_too_long = AnswerError::PromptTooLong {
            prompt_tokens: 1_500,
            max_tokens: 8_000,
            context_length: 8_192,
        };
        assert!(
            answer_too_long.to_string().ends_with(
                "allow at most 6692 tokens for the answer (--max-tokens), or ask for \
                            fewer seeds (--k) or a token budget (--budget-tokens)"
            ),
            "{answer_too_long}"
        );
        let prompt_too_long = AnswerError::PromptTooLong {
            prompt_tokens: 9_000,
            max_tokens: 256,
            context_length: 8_192,
        };
        assert!(
            prompt_too_long
                .to_string()
                .contains("the prompt alone fills the model's context"),
            "{prompt_too_long}"
        );
    }
}
