//! Answers from the context SCAR chose: a prompt with numbered sources, an answer streamed from
//! a local GGUF model (candle) or an OpenAI-compatible server, and its `[n]` citations mapped
//! back to chunks.
//!
//! ```no_run
//! use scar_answer::{GenerationParams, LlmLocator, LoadOptions, LocalModel, Question, DEFAULT_LLM};
//! use scar_policy::{Options, Policy};
//! use scar_retrieve::FirstStage;
//! # fn retriever() -> scar_retrieve::Retriever { unimplemented!() }
//! let retriever = retriever();
//! let prepared = retriever.prepare("How long is the notice period?", FirstStage::Dense, 5)?;
//! let question = Question::search(&retriever, &prepared, &Options::new(Policy::scar(1))?)?;
//! let path = LlmLocator::from_env("models").locate(DEFAULT_LLM)?;
//! let mut model = LocalModel::load(&path, &LoadOptions::default())?;
//! let params = GenerationParams::default();
//! let report = question.answer(&mut model, &retriever, &params, &mut |piece| {
//!     print!("{piece}");
//!     std::ops::ControlFlow::Continue(())
//! })?;
//! println!("\n{}", report.summary());
//! for source in &report.answer.citations.cited {
//!     println!("[{}] {} #{}", source.number, source.document, source.ordinal);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod attention;
mod attribution;
mod conversation;
mod decoder;
mod error;
mod gemma;
mod gguf_tokenizer;
mod judge;
mod llama;
mod local;
mod locate;
mod packed;
mod prompt;
mod question;
mod remote;
mod stores;
mod template;

use std::ops::ControlFlow;

use scar_retrieve::SearchReport;
use serde::{Deserialize, Serialize};

pub use attribution::{FOUND_SHARE, SentenceSupport};
pub use conversation::{Turn, standalone_question};
pub use error::{AnswerError, Result};
pub use judge::{ChatJudge, DEFAULT_CROSS_ENCODER, LikelihoodJudge, RerankerModels, Reranking};
pub use local::{LoadOptions, LocalModel, cpu_decoding, decoding_instructions};
pub use locate::{DEFAULT_LLM, KNOWN_LLMS, KnownLlm, LlmLocator};
pub use prompt::{AnswerPiece, Citations, Prompt, Source, answer_pieces};
pub use question::Question;
pub use remote::{RemoteModel, RemoteOptions};
pub use stores::{ModelStores, Store, StoredLlm};
pub use template::ChatTemplate;

/// How to sample an answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GenerationParams {
    /// Most tokens generated.
    pub max_tokens: usize,
    /// 0 picks the likeliest token every time (the default: answers from sources should not
    /// vary); above 0 samples.
    pub temperature: f64,
    /// Nucleus sampling's probability mass, when sampling.
    pub top_p: f64,
    /// Seed of the sampler, so a sampled answer can be reproduced.
    pub seed: u64,
    /// Divides the logits of recently generated tokens (1 = off): small models loop without it.
    pub repeat_penalty: f32,
}

impl Default for GenerationParams {
    fn default() -> Self {
        Self {
            max_tokens: 256,
            temperature: 0.0,
            top_p: 0.9,
            seed: 42,
            repeat_penalty: 1.1,
        }
    }
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model ended its turn.
    EndOfTurn,
    /// `max_tokens` was reached.
    MaxTokens,
    /// The caller stopped it.
    Cancelled,
}

/// What a model produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// The answer text.
    pub text: String,
    /// Tokens in the prompt as the model saw it (None when a server does not say and they
    /// cannot be counted here).
    pub prompt_tokens: Option<usize>,
    /// Tokens generated.
    pub generated_tokens: usize,
    /// Why it ended.
    pub stop: StopReason,
    /// Seconds until the first token (reading the prompt).
    pub first_token_seconds: f64,
    /// Seconds in all.
    pub total_seconds: f64,
}

impl Generation {
    /// Generated tokens per second after the first one: the decoding speed.
    #[must_use]
    pub fn tokens_per_second(&self) -> f64 {
        let decoding = self.total_seconds - self.first_token_seconds;
        if self.generated_tokens > 1 && decoding > 0.0 {
            (self.generated_tokens - 1) as f64 / decoding
        } else {
            0.0
        }
    }
}

/// Something that turns a prompt into streamed text: a local model or a server.
pub trait Generator: Send {
    /// The model's name, for reports.
    fn name(&self) -> String;

    /// Tokens the prompt takes for this model, when that can be known before sending it.
    fn count_prompt_tokens(&self, prompt: &Prompt) -> Result<Option<usize>>;

    /// Generates an answer, passing each new piece of text to `on_text` as it arrives;
    /// `on_text` returns `Break` to stop early.
    fn generate(
        &mut self,
        prompt: &Prompt,
        params: &GenerationParams,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Generation>;
}

/// Version of the JSON layout of [`AnswerReport`] (`scar ask --json`, the server's answers).
pub const ANSWER_SCHEMA_VERSION: &str = "scar.answer/3";

/// A question answered: the search whose context was sent, the answer, and what static ±1's
/// context from the same seeds would have cost, in the layout [`ANSWER_SCHEMA_VERSION`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerReport {
    /// [`ANSWER_SCHEMA_VERSION`].
    pub schema: String,
    /// The search.
    pub search: SearchReport,
    /// The answer built from its context.
    pub answer: Answer,
    /// The prompt tokens of static ±1's context from the same seeds (the paper's saving);
    /// `None` when the model cannot count them (a server).
    pub static_window_1_prompt_tokens: Option<usize>,
}

impl AnswerReport {
    /// The report of `answer`, built from `search`.
    fn new(search: SearchReport, answer: Answer, baseline_prompt_tokens: Option<usize>) -> Self {
        Self {
            schema: ANSWER_SCHEMA_VERSION.to_owned(),
            search,
            answer,
            static_window_1_prompt_tokens: baseline_prompt_tokens,
        }
    }

    /// One line for a person: the prompt's size against static ±1's, then the answer's length,
    /// why it stopped, its speed and the model.
    #[must_use]
    pub fn summary(&self) -> String {
        let prompt = match (
            self.answer.generation.prompt_tokens,
            self.static_window_1_prompt_tokens,
        ) {
            (Some(ours), Some(theirs)) if theirs > 0 => format!(
                "prompt {ours} tokens (static ±1: {theirs}, {:+.0}%)",
                (ours as f64 / theirs as f64 - 1.0) * 100.0
            ),
            (Some(ours), _) => format!("prompt {ours} tokens"),
            (None, _) => "prompt size not reported by the server".to_owned(),
        };
        self.answer.summary(&prompt)
    }
}

/// An answer with its prompt and the chunks it cites.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The model that answered.
    pub model: String,
    /// The prompt sent.
    pub prompt: Prompt,
    /// What came back.
    pub generation: Generation,
    /// The sources cited by `[n]`.
    pub citations: Citations,
    /// Each sentence with the source found to support it.
    #[serde(default)]
    pub attribution: Vec<SentenceSupport>,
}

impl Answer {
    /// Builds the prompt from a search report, generates, maps the citations, and traces each
    /// sentence of the answer to the source that supports it best, with the embedding model and
    /// index of `retriever` (the ones the context came from).
    fn generate<S: scar_retrieve::ChunkStore>(
        generator: &mut dyn Generator,
        report: &SearchReport,
        params: &GenerationParams,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
        retriever: &scar_retrieve::Retriever<S>,
    ) -> Result<Self> {
        let prompt = Prompt::from_report(report);
        let mut generation = generator.generate(&prompt, params, on_text)?;
        if generation.prompt_tokens.is_none() {
            generation.prompt_tokens = generator.count_prompt_tokens(&prompt)?;
        }
        let citations = prompt.citations(&generation.text);
        let attribution = attribution::attribute(&generation.text, &prompt, retriever)?;
        Ok(Self {
            model: generator.name(),
            prompt,
            generation,
            citations,
            attribution,
        })
    }

    /// One line: `prompt` (the account of the prompt's size), then the answer's length, why it
    /// stopped, its speed and the model.
    fn summary(&self, prompt: &str) -> String {
        let generation = &self.generation;
        let stop = match generation.stop {
            StopReason::EndOfTurn => "end of turn",
            StopReason::MaxTokens => "max tokens reached",
            StopReason::Cancelled => "cancelled",
        };
        format!(
            "{prompt} · answer {} tokens ({stop}) · first token {:.1} s · {:.1} tokens/s · {}",
            generation.generated_tokens,
            generation.first_token_seconds,
            generation.tokens_per_second(),
            self.model
        )
    }
}
