//! The judges of the first stage's candidates a user can choose ([`Reranking`]), and the two
//! this crate brings, both a local chat model: [`ChatJudge`], the probability it gives to "yes"
//! when asked whether a passage holds what a question asks for (as Qwen3-Reranker scores with
//! its own model), and [`LikelihoodJudge`], how much likelier it finds the question once it has
//! read the passage (as unsupervised passage rerankers score with a language model).

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use candle_core::DType;
use scar_embed::{CrossEncoder, EmbedOptions, Embedder, ModelLocator};
use scar_retrieve::{BestSentence, Candidate, ChunkStore, Rerank, RetrieveError};

use crate::{AnswerError, LlmLocator, LoadOptions, LocalModel, Prompt, Result};

/// The cross-encoder loaded for [`Reranking::CrossEncoder`] unless another is named.
pub const DEFAULT_CROSS_ENCODER: &str = "cross-encoder/ms-marco-MiniLM-L-6-v2";

/// Which judge re-scores the first stage's candidates before the best k become the seeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reranking {
    /// The first stage's order stands.
    #[default]
    None,
    /// [`BestSentence`]: each candidate's sentence closest to the question, with the index's
    /// own model.
    Sentence,
    /// [`ChatJudge`]: the chat model's probability of "yes".
    Llm,
    /// [`LikelihoodJudge`]: how much likelier the chat model finds the question after the
    /// passage.
    Likelihood,
    /// A cross-encoder ([`CrossEncoder`]).
    CrossEncoder,
}

impl Reranking {
    /// Every choice, in the order help text lists them.
    pub const ALL: [Self; 5] = [
        Self::None,
        Self::Sentence,
        Self::Llm,
        Self::Likelihood,
        Self::CrossEncoder,
    ];

    /// The judge this choice names, loaded (`None` for [`Reranking::None`]): `embedder` is the
    /// index's model, `models` say where the others are.
    pub fn open(
        self,
        embedder: Arc<Embedder>,
        models: &RerankerModels<'_>,
    ) -> Result<Option<Arc<dyn Rerank>>> {
        Ok(Some(match self {
            Self::None => return Ok(None),
            Self::Sentence => Arc::new(BestSentence::new(embedder)),
            Self::Llm => Arc::new(ChatJudge::new(models.chat_model()?)?),
            Self::Likelihood => Arc::new(LikelihoodJudge::new(models.chat_model()?)),
            Self::CrossEncoder => {
                let reranker = ModelLocator::from_env(models.models_dir)
                    .locate(models.cross_encoder)
                    .and_then(|files| CrossEncoder::load(&files, models.embed))
                    .map_err(|error| AnswerError::Reranker(Box::new(error)))?;
                Arc::new(reranker)
            }
        }))
    }
}

impl fmt::Display for Reranking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::None => "none",
            Self::Sentence => "sentence",
            Self::Llm => "llm",
            Self::Likelihood => "likelihood",
            Self::CrossEncoder => "cross-encoder",
        })
    }
}

impl FromStr for Reranking {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
        let wanted = text.trim().to_ascii_lowercase().replace('_', "-");
        Self::ALL
            .into_iter()
            .find(|choice| choice.to_string() == wanted)
            .ok_or_else(|| {
                format!(
                    "unknown reranker `{text}`: use none, sentence, llm, likelihood or \
                     cross-encoder"
                )
            })
    }
}

/// Where the judges other than the index's own model come from.
#[derive(Debug, Clone, Copy)]
pub struct RerankerModels<'a> {
    /// The folder of installed models, searched (as [`ModelLocator`] and [`LlmLocator`] search
    /// it) before the hub.
    pub models_dir: &'a Path,
    /// The cross-encoder: a hub id, a short name or a folder.
    pub cross_encoder: &'a str,
    /// The chat model: a GGUF file, folder, known name or `org/repo:file.gguf`.
    pub llm: &'a str,
    /// The device and precision the cross-encoder runs in (and the chat model's device).
    pub embed: &'a EmbedOptions,
}

impl RerankerModels<'_> {
    /// The chat model a judge loads its own copy of.
    fn chat_model(&self) -> Result<LocalModel> {
        let path = LlmLocator::from_env(self.models_dir).locate(self.llm)?;
        let options = LoadOptions {
            device: self.embed.device,
            ..LoadOptions::default()
        };
        LocalModel::load(&path, &options)
    }
}

/// What the model is asked, once per passage.
const INSTRUCTION: &str = "Judge whether the passage contains information that answers the \
                           question. Answer only \"yes\" or \"no\".";

/// The probability a local chat model gives to "yes" over "no" (each in its lower- and
/// upper-case spellings) as the first word of its answer: a judge that needs no model of its
/// own kind (any chat model GGUF serves; the judge loads its own copy), at the cost of reading
/// every passage it judges.
pub struct ChatJudge {
    /// The model keeps its key-value cache between calls, so a judgment holds it alone.
    model: Mutex<LocalModel>,
    yes: Vec<u32>,
    no: Vec<u32>,
}

impl fmt::Debug for ChatJudge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatJudge").finish_non_exhaustive()
    }
}

impl ChatJudge {
    /// The judge for `model`, whose tokenizer must spell "yes" and "no" as one token each.
    pub fn new(model: LocalModel) -> Result<Self> {
        let single = |words: [&str; 2]| -> Vec<u32> {
            words
                .iter()
                .filter_map(|word| {
                    let ids = model.tokenizer().encode(*word, false).ok()?;
                    match ids.get_ids() {
                        [id] => Some(*id),
                        _ => None,
                    }
                })
                .collect()
        };
        let (yes, no) = (single(["yes", "Yes"]), single(["no", "No"]));
        if yes.is_empty() || no.is_empty() {
            return Err(AnswerError::UnsupportedTokenizer {
                reason: "the judge needs \"yes\" and \"no\" to be one token each".to_owned(),
                source: None,
            });
        }
        Ok(Self {
            model: Mutex::new(model),
            yes,
            no,
        })
    }

    /// The probability that `passage` holds what `question` asks for, in [0, 1]. A passage too
    /// long for the model's context is judged by as much of its beginning as fits.
    pub fn judge(&self, question: &str, passage: &str) -> Result<f32> {
        let mut model = self
            .model
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let ids = fitted_prompt(&model, passage, 0, |passage| Prompt {
            system: INSTRUCTION.to_owned(),
            user: format!("Question: {question}\n\nPassage: {passage}"),
            sources: Vec::new(),
        })?;
        let logits: Vec<f32> = model
            .next_logits(&ids, 0)?
            .to_dtype(DType::F32)?
            .to_vec1()?;
        Ok(yes_probability(&logits, &self.yes, &self.no))
    }
}

/// What the likelihood judge's model is asked: the question is its reply.
const QUESTION_INSTRUCTION: &str = "Write a question that the passage answers.";

/// How much likelier a local chat model finds the question once it has read the passage:
/// `log P(question | passage) − log P(question | no passage)`, per token of the question (the
/// pointwise mutual information of the two, as unsupervised passage rerankers score with a
/// language model). The model is asked to write a question that the passage answers, and the
/// question is read as its reply, token by token. Any chat model GGUF serves (the judge loads
/// its own copy); it reads every passage it judges, and the question once more without one, so
/// that scores compare across questions.
pub struct LikelihoodJudge {
    /// The model keeps its key-value cache between calls, so a judgment holds it alone.
    model: Mutex<LocalModel>,
}

impl fmt::Debug for LikelihoodJudge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LikelihoodJudge").finish_non_exhaustive()
    }
}

impl LikelihoodJudge {
    /// The judge for `model`.
    #[must_use]
    pub fn new(model: LocalModel) -> Self {
        Self {
            model: Mutex::new(model),
        }
    }

    /// Each passage's score for `question`, in nats per token of the question: above 0 where
    /// the passage makes the question likelier. A passage too long for the model's context is
    /// judged by as much of its beginning as fits beside the question.
    pub fn judge(&self, question: &str, passages: &[String]) -> Result<Vec<f32>> {
        let mut model = self
            .model
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let question_ids = model
            .tokenizer()
            .encode(question, false)
            .map_err(AnswerError::Tokenizer)?
            .get_ids()
            .to_vec();
        if question_ids.is_empty() {
            return Ok(vec![0.0; passages.len()]);
        }
        let mut log_likelihood = |passage: &str| -> Result<f64> {
            let ids = fitted_prompt(&model, passage, question_ids.len(), |passage| Prompt {
                system: QUESTION_INSTRUCTION.to_owned(),
                user: format!("Passage: {passage}"),
                sources: Vec::new(),
            })?;
            continuation_log_probability(&mut model, &ids, &question_ids)
        };
        let alone = log_likelihood("")?;
        passages
            .iter()
            .map(|passage| {
                let gain = log_likelihood(passage)? - alone;
                Ok((gain / question_ids.len() as f64) as f32)
            })
            .collect()
    }
}

/// `log P(continuation | prompt)`: the prompt read at once, then the continuation's tokens one at
/// a time, each scored by the distribution before it.
fn continuation_log_probability(
    model: &mut LocalModel,
    prompt: &[u32],
    continuation: &[u32],
) -> Result<f64> {
    let mut logits = model.next_logits(prompt, 0)?;
    let mut total = 0.0;
    for (index, &token) in continuation.iter().enumerate() {
        let values: Vec<f32> = logits.to_dtype(DType::F32)?.to_vec1()?;
        total += log_probability(&values, token);
        if index + 1 < continuation.len() {
            logits = model.next_logits(&[token], prompt.len() + index)?;
        }
    }
    Ok(total)
}

/// The log-softmax of `logits` at `token`, summed in f64 over the vocabulary.
fn log_probability(logits: &[f32], token: u32) -> f64 {
    let top = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mass: f64 = logits.iter().map(|&v| f64::from(v - top).exp()).sum();
    let at = logits
        .get(token as usize)
        .copied()
        .unwrap_or(f32::NEG_INFINITY);
    f64::from(at - top) - mass.ln()
}

impl Rerank for LikelihoodJudge {
    fn score(
        &self,
        query: &str,
        candidates: &[Candidate],
        store: &dyn ChunkStore,
    ) -> scar_retrieve::Result<Vec<f32>> {
        self.judge(query, &passages(candidates, store)?)
            .map_err(|error| RetrieveError::Rerank(Box::new(error)))
    }
}

/// The tokens of the prompt `make` builds around `passage`, the passage cut from its end until
/// the prompt and `reserve` more tokens fit the model's context.
fn fitted_prompt(
    model: &LocalModel,
    passage: &str,
    reserve: usize,
    make: impl Fn(&str) -> Prompt,
) -> Result<Vec<u32>> {
    let context = model.context_length();
    let mut passage = passage.to_owned();
    let mut ids = model.encode(&make(&passage))?;
    while ids.len() + reserve > context {
        if passage.is_empty() {
            // The rest alone fills the model's context.
            return Err(AnswerError::PromptTooLong {
                prompt_tokens: ids.len(),
                max_tokens: reserve,
                context_length: context,
            });
        }
        passage = fitted(model, &passage, ids.len() + reserve - context)?;
        ids = model.encode(&make(&passage))?;
    }
    Ok(ids)
}

/// `passage` shortened by at least `excess` tokens (and one more, as a cut may merge two);
/// empty when it has no more.
fn fitted(model: &LocalModel, passage: &str, excess: usize) -> Result<String> {
    let tokenizer = model.tokenizer();
    let encoding = tokenizer
        .encode(passage, false)
        .map_err(AnswerError::Tokenizer)?;
    let ids = encoding.get_ids();
    let keep = ids.len().saturating_sub(excess + 1);
    tokenizer
        .decode(&ids[..keep], true)
        .map_err(AnswerError::Tokenizer)
}

/// Σ softmax over the `yes` tokens, within the `yes` and `no` tokens alone.
fn yes_probability(logits: &[f32], yes: &[u32], no: &[u32]) -> f32 {
    let at = |id: &u32| {
        logits
            .get(*id as usize)
            .copied()
            .unwrap_or(f32::NEG_INFINITY)
    };
    let top = yes
        .iter()
        .chain(no)
        .map(at)
        .fold(f32::NEG_INFINITY, f32::max);
    let mass = |ids: &[u32]| ids.iter().map(|id| (at(id) - top).exp()).sum::<f32>();
    let (yes, no) = (mass(yes), mass(no));
    yes / (yes + no)
}

impl Rerank for ChatJudge {
    fn score(
        &self,
        query: &str,
        candidates: &[Candidate],
        store: &dyn ChunkStore,
    ) -> scar_retrieve::Result<Vec<f32>> {
        let mut scores = Vec::with_capacity(candidates.len());
        for passage in passages(candidates, store)? {
            let probability = self
                .judge(query, &passage)
                .map_err(|error| RetrieveError::Rerank(Box::new(error)))?;
            scores.push(probability);
        }
        Ok(scores)
    }
}

/// The candidates as the chat-model judges read them, as the cross-encoder does: each one's
/// heading path, then its text.
#[expect(
    clippy::result_large_err,
    reason = "the store's own error, passed on as `Rerank::score` returns it"
)]
fn passages(
    candidates: &[Candidate],
    store: &dyn ChunkStore,
) -> scar_retrieve::Result<Vec<String>> {
    let mut passages = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        passages.push(store.stored(candidate.id)?.passage());
    }
    Ok(passages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reranking_names_round_trip_and_an_unknown_one_lists_them() {
        for choice in Reranking::ALL {
            assert_eq!(choice.to_string().parse::<Reranking>(), Ok(choice));
        }
        assert_eq!(
            "Cross_Encoder".parse::<Reranking>(),
            Ok(Reranking::CrossEncoder)
        );
        let error = "colbert".parse::<Reranking>().unwrap_err();
        assert!(
            error.contains("none, sentence, llm, likelihood or cross-encoder"),
            "{error}"
        );
    }

    #[test]
    fn log_probability_is_the_log_softmax_at_the_token() {
        let logits = [0.0, 2f32.ln(), 0.0];
        assert!((log_probability(&logits, 1) - 0.5f64.ln()).abs() < 1e-6);
        assert!((log_probability(&logits, 0) - 0.25f64.ln()).abs() < 1e-6);
        // Large logits do not overflow; a token past the vocabulary is impossible.
        assert!(log_probability(&[800.0, 0.0], 0).abs() < 1e-9);
        let past_the_end = log_probability(&[0.0], 7);
        assert!(past_the_end.is_infinite() && past_the_end < 0.0);
    }

    #[test]
    fn yes_probability_is_the_share_of_yes_among_the_answers_it_allows() {
        // Ids 1 and 2 spell yes, 3 no; id 0 is neither and does not count.
        let logits = [9.0, 0.0, 0.0, 0.0];
        let p = yes_probability(&logits, &[1, 2], &[3]);
        assert!((p - 2.0 / 3.0).abs() < 1e-6, "{p}");
        // Large logits do not overflow.
        let p = yes_probability(&[500.0, 400.0], &[0], &[1]);
        assert!((p - 1.0).abs() < 1e-6, "{p}");
    }
}
