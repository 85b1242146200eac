//! What a search or a question asks for, as the HTTP API and the MCP tools take it, checked once.

use scar_answer::GenerationParams;
use scar_policy::{Options, Policy, PolicyKind, PolicySettings};
use scar_retrieve::{DEFAULT_K, FirstStage};
use serde::Deserialize;

use crate::{Result, ServeError};

/// The longest question accepted, in characters: a question, not a document.
pub const MAX_QUESTION_CHARS: usize = 4_000;

/// The most seeds a request may ask for: each costs ranking depth and policy work.
pub const MAX_K: usize = 200;

/// The most tokens an answer may ask for.
pub const MAX_ANSWER_TOKENS: usize = 4_096;

/// A search: the question and, optionally, every setting `scar search` takes.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// The question.
    pub question: String,
    /// The index to search, by name (the first served when absent).
    #[serde(default)]
    pub index: Option<String>,
    /// Seeds from the first stage (default 5).
    #[serde(default)]
    pub k: Option<usize>,
    /// `evidence` (default), `scar`, `static_window`, `top_k`, `parent` or `section`.
    #[serde(default)]
    pub policy: Option<PolicyKind>,
    /// Neighbours considered on each side (the policy's own by default).
    #[serde(default)]
    pub window: Option<u32>,
    /// The evidence walk's depth, as a multiple of k.
    #[serde(default)]
    pub depth: Option<u32>,
    /// SCAR's λ.
    #[serde(default)]
    pub lambda: Option<f32>,
    /// SCAR's γ.
    #[serde(default)]
    pub gamma: Option<f32>,
    /// The parent block, in chunks.
    #[serde(default)]
    pub block: Option<u32>,
    /// `hybrid` (default), `dense` or `bm25`.
    #[serde(default)]
    pub first_stage: Option<FirstStage>,
    /// Stop expanding when the context would pass this many tokens.
    #[serde(default)]
    pub budget_tokens: Option<usize>,
}

/// A question to answer: a search, and how to generate. Its JSON is a [`SearchRequest`]'s with
/// the generation fields beside the search's ([`AskRequest::from_json`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AskRequest {
    /// The search whose context is sent.
    pub search: SearchRequest,
    /// Most tokens in the answer (default 256).
    pub max_tokens: Option<usize>,
    /// 0 (default) answers deterministically; up to 2 samples.
    pub temperature: Option<f64>,
    /// The sampling seed.
    pub seed: Option<u64>,
}

/// A search request checked: what the retriever runs.
#[derive(Debug, Clone)]
pub struct Search {
    /// The question, trimmed of nothing: as asked.
    pub question: String,
    /// The index's name, if one was named.
    pub index: Option<String>,
    /// Seeds.
    pub k: usize,
    /// How seeds are found.
    pub first_stage: FirstStage,
    /// The policy and its budget.
    pub options: Options,
}

impl SearchRequest {
    /// Checks every value: a bad one is a [`ServeError::BadRequest`] that names it.
    pub fn checked(&self) -> Result<Search> {
        let chars = self.question.chars().count();
        if self.question.trim().is_empty() {
            return Err(ServeError::bad("`question` is empty"));
        }
        if chars > MAX_QUESTION_CHARS {
            return Err(ServeError::bad(format!(
                "`question` has {chars} characters; at most {MAX_QUESTION_CHARS} are accepted"
            )));
        }
        let k = self.k.unwrap_or(DEFAULT_K);
        if !(1..=MAX_K).contains(&k) {
            return Err(ServeError::bad(format!(
                "`k` is {k}; it must be between 1 and {MAX_K}"
            )));
        }
        let defaults = PolicySettings::default();
        let settings = PolicySettings {
            lambda: self.lambda.unwrap_or(defaults.lambda),
            gamma: self.gamma.unwrap_or(defaults.gamma),
            window: self.window,
            block: self.block.unwrap_or(defaults.block),
            depth: self.depth.unwrap_or(defaults.depth),
        };
        let policy = Policy::from_kind(self.policy.unwrap_or_default(), &settings);
        let options = Options::new(policy)
            .map_err(|e| ServeError::bad(e.to_string()))?
            .with_budget(self.budget_tokens);
        Ok(Search {
            question: self.question.clone(),
            index: self.index.clone(),
            k,
            first_stage: self.first_stage.unwrap_or_default(),
            options,
        })
    }
}

impl SearchRequest {
    /// Reads a search from JSON; an unknown field or a wrong type is a bad request naming it.
    pub fn from_json(value: serde_json::Value) -> Result<Self> {
        serde_json::from_value(value).map_err(|e| ServeError::bad(e.to_string()))
    }
}

impl AskRequest {
    /// Reads a question from a JSON object: the generation fields, and a search from the rest
    /// (so that an unknown field is refused as in a search).
    pub fn from_json(value: serde_json::Value) -> Result<Self> {
        let serde_json::Value::Object(mut fields) = value else {
            return Err(ServeError::bad("the request must be a JSON object"));
        };
        let max_tokens = take(&mut fields, "max_tokens")?;
        let temperature = take(&mut fields, "temperature")?;
        let seed = take(&mut fields, "seed")?;
        let search = SearchRequest::from_json(serde_json::Value::Object(fields))?;
        Ok(Self {
            search,
            max_tokens,
            temperature,
            seed,
        })
    }

    /// The search checked, and the generation parameters.
    pub fn checked(&self) -> Result<(Search, GenerationParams)> {
        let search = self.search.checked()?;
        let defaults = GenerationParams::default();
        let max_tokens = self.max_tokens.unwrap_or(defaults.max_tokens);
        if !(1..=MAX_ANSWER_TOKENS).contains(&max_tokens) {
            return Err(ServeError::bad(format!(
                "`max_tokens` is {max_tokens}; it must be between 1 and {MAX_ANSWER_TOKENS}"
            )));
        }
        let temperature = self.temperature.unwrap_or(defaults.temperature);
        if !(0.0..=2.0).contains(&temperature) {
            return Err(ServeError::bad(format!(
                "`temperature` is {temperature}; it must be between 0 and 2"
            )));
        }
        let params = GenerationParams {
            max_tokens,
            temperature,
            seed: self.seed.unwrap_or(defaults.seed),
            ..defaults
        };
        Ok((search, params))
    }
}

/// Removes `key` from `fields` and reads it, if it is there and not null.
fn take<T: serde::de::DeserializeOwned>(
    fields: &mut serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Result<Option<T>> {
    fields
        .remove(key)
        .filter(|value| !value.is_null())
        .map(|value| {
            serde_json::from_value(value).map_err(|e| ServeError::bad(format!("`{key}`: {e}")))
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(json: &str) -> Result<Search> {
        SearchRequest::from_json(serde_json::from_str(json).unwrap())?.checked()
    }

    #[test]
    fn defaults_are_the_command_lines() {
        let search = checked(r#"{"question": "kayak fee?"}"#).unwrap();
        assert_eq!(search.k, DEFAULT_K);
        assert_eq!(search.first_stage, FirstStage::Hybrid);
        assert_eq!(search.options, Options::new(Policy::default()).unwrap());
    }

    #[test]
    fn every_setting_is_read_and_checked() {
        let search = checked(
            r#"{"question": "q", "k": 3, "policy": "scar", "window": 2, "lambda": 0.2,
                "gamma": 0.7, "first_stage": "bm25", "budget_tokens": 500}"#,
        )
        .unwrap();
        assert_eq!(search.k, 3);
        assert_eq!(
            search.options,
            Options::new(Policy::Scar {
                lambda: 0.2,
                gamma: 0.7,
                window: 2
            })
            .unwrap()
            .with_budget(Some(500))
        );
        for bad in [
            r#"{"question": "  "}"#,
            r#"{"question": "q", "k": 0}"#,
            r#"{"question": "q", "k": 201}"#,
            r#"{"question": "q", "gamma": 1.5, "policy": "scar"}"#,
            r#"{"question": "q", "policy": "nearest"}"#,
            r#"{"question": "q", "lamda": 0.2}"#,
        ] {
            assert!(checked(bad).is_err(), "{bad}");
        }
        let long = format!(
            r#"{{"question": "{}"}}"#,
            "a".repeat(MAX_QUESTION_CHARS + 1)
        );
        assert!(checked(&long).is_err());
    }

    #[test]
    fn an_answer_is_bounded() {
        let ask =
            |json: &str| AskRequest::from_json(serde_json::from_str(json).unwrap())?.checked();
        let (_, params) = ask(r#"{"question": "q", "max_tokens": 64}"#).unwrap();
        assert_eq!(params.max_tokens, 64);
        assert!(ask(r#"{"question": "q", "max_tokens": 0}"#).is_err());
        assert!(ask(r#"{"question": "q", "temperature": 3}"#).is_err());
        assert!(ask(r#"{"question": "q", "max_token": 64}"#).is_err());
        assert!(ask(r#"["q"]"#).is_err());
    }
}
