//! A `tokenizers` tokenizer rebuilt from the vocabulary a GGUF file carries.
//!
//! candle's own GGUF tokenizer does not know `SmolLM2`'s pre-tokenizer (`smollm`): it adds a
//! prefix space and keeps digits together, so prompts are tokenized unlike in training. This
//! builds the byte-level BPE with the pre-tokenizer each `tokenizer.ggml.pre` names.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

use crate::{AnswerError, Result};

/// Llama 3's split: contractions, words with one leading non-letter, numbers of up to three
/// digits, punctuation runs, newlines, spaces.
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// `token_type` of control tokens (`<|im_start|>`, `<|eot_id|>`) in GGUF.
const CONTROL_TOKEN: i32 = 3;

/// Builds the tokenizer from GGUF metadata.
pub fn from_metadata(metadata: &HashMap<String, Value>) -> Result<Tokenizer> {
    let text = |key: &str| metadata.get(key).and_then(|v| v.to_string().ok());
    let unsupported = |reason: String| AnswerError::UnsupportedTokenizer {
        reason,
        source: None,
    };
    let refused = |reason: &str, source: tokenizers::Error| AnswerError::UnsupportedTokenizer {
        reason: reason.to_owned(),
        source: Some(source),
    };
    let kind = text("tokenizer.ggml.model").map_or("", String::as_str);
    if kind != "gpt2" {
        return Err(unsupported(format!(
            "tokenizer.ggml.model = {kind:?} (only byte-level BPE, \"gpt2\", is built from GGUF)"
        )));
    }
    let tokens = string_array(metadata, "tokenizer.ggml.tokens")?;
    let merges = string_array(metadata, "tokenizer.ggml.merges")?
        .into_iter()
        .map(|merge| {
            merge
                .split_once(' ')
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .ok_or_else(|| unsupported(format!("merge without a space: {merge:?}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let pre = text("tokenizer.ggml.pre").map_or("default", String::as_str);
    let (pre_tokenizer, ignore_merges) = match pre {
        "smollm" => (
            Sequence::new(vec![
                PreTokenizerWrapper::Digits(Digits::new(true)),
                PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true)),
            ]),
            false,
        ),
        "llama-bpe" => (
            Sequence::new(vec![
                PreTokenizerWrapper::Split(
                    Split::new(
                        SplitPattern::Regex(LLAMA3_SPLIT.to_owned()),
                        SplitDelimiterBehavior::Isolated,
                        false,
                    )
                    .map_err(|e| refused("Llama 3's split pattern is refused", e))?,
                ),
                PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, false)),
            ]),
            true,
        ),
        "default" | "gpt2" => (
            Sequence::new(vec![PreTokenizerWrapper::ByteLevel(ByteLevel::new(
                false, true, true,
            ))]),
            false,
        ),
        other => {
            return Err(unsupported(format!(
                "tokenizer.ggml.pre = {other:?}; put the model's tokenizer.json next to the GGUF file"
            )));
        }
    };
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(id, token)| (token.clone(), id as u32))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .ignore_merges(ignore_merges)
        .build()
        .map_err(|e| refused("the vocabulary and merges are refused", e))?;
    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer.with_pre_tokenizer(Some(pre_tokenizer));
    tokenizer.with_decoder(Some(DecoderWrapper::ByteLevel(ByteLevel::default())));
    let types = metadata
        .get("tokenizer.ggml.token_type")
        .and_then(|v| v.to_vec().ok());
    let special: Vec<AddedToken> = types
        .into_iter()
        .flatten()
        .zip(&tokens)
        .filter(|(kind, _)| kind.to_i32().is_ok_and(|k| k == CONTROL_TOKEN))
        .map(|(_, token)| AddedToken::from(token.clone(), true))
        .collect();
    tokenizer
        .add_special_tokens(special)
        .map_err(|e| refused("the control tokens are refused", e))?;
    Ok(tokenizer)
}

fn string_array(metadata: &HashMap<String, Value>, key: &str) -> Result<Vec<String>> {
    let missing = || AnswerError::UnsupportedTokenizer {
        reason: format!("no {key} in the GGUF metadata"),
        source: None,
    };
    metadata
        .get(key)
        .and_then(|v| v.to_vec().ok())
        .ok_or_else(missing)?
        .iter()
        .map(|v| v.to_string().cloned().map_err(|_| missing()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte-level vocabulary of the characters used below plus a few merges.
    fn metadata(pre: &str) -> HashMap<String, Value> {
        let mut tokens: Vec<String> = "abcdefghijklmnopqrstuvwxyz0123456789'.?"
            .chars()
            .map(String::from)
            .collect();
        tokens.extend(["Ġ", "Ġa", "ab", "12", "<|im_end|>"].map(String::from));
        let types: Vec<Value> = tokens
            .iter()
            .map(|t| Value::I32(if t.starts_with("<|") { 3 } else { 1 }))
            .collect();
        let strings =
            |items: Vec<String>| Value::Array(items.into_iter().map(Value::String).collect());
        HashMap::from([
            (
                "tokenizer.ggml.model".to_owned(),
                Value::String("gpt2".to_owned()),
            ),
            (
                "tokenizer.ggml.pre".to_owned(),
                Value::String(pre.to_owned()),
            ),
            ("tokenizer.ggml.tokens".to_owned(), strings(tokens)),
            (
                "tokenizer.ggml.merges".to_owned(),
                strings(vec!["Ġ a".to_owned(), "a b".to_owned(), "1 2".to_owned()]),
            ),
            ("tokenizer.ggml.token_type".to_owned(), Value::Array(types)),
        ])
    }

    fn pieces(tokenizer: &Tokenizer, text: &str) -> Vec<String> {
        tokenizer.encode(text, false).unwrap().get_tokens().to_vec()
    }

    #[test]
    fn smollm_splits_digits_and_adds_no_prefix_space() {
        let tokenizer = from_metadata(&metadata("smollm")).unwrap();
        // Digits one by one, so the "1 2" merge never applies; no leading "Ġ" on "ab".
        assert_eq!(pieces(&tokenizer, "ab 12"), ["ab", "Ġ", "1", "2"]);
        assert_eq!(pieces(&tokenizer, "ab a"), ["ab", "Ġa"]);
    }

    #[test]
    fn llama3_keeps_numbers_together_and_round_trips() {
        let tokenizer = from_metadata(&metadata("llama-bpe")).unwrap();
        assert_eq!(pieces(&tokenizer, "ab 12"), ["ab", "Ġ", "12"]);
        let ids = tokenizer
            .encode("ab 12 a?", false)
            .unwrap()
            .get_ids()
            .to_vec();
        assert_eq!(tokenizer.decode(&ids, false).unwrap(), "ab 12 a?");
    }

    #[test]
    fn control_tokens_are_matched_whole_and_skipped_when_decoding() {
        let tokenizer = from_metadata(&metadata("smollm")).unwrap();
        let encoding = tokenizer.encode("ab<|im_end|>", false).unwrap();
        assert_eq!(encoding.get_tokens(), ["ab", "<|im_end|>"]);
        assert_eq!(tokenizer.decode(encoding.get_ids(), true).unwrap(), "ab");
    }

    #[test]
    fn unknown_pre_tokenizers_and_models_are_refused_with_advice() {
        let error = from_metadata(&metadata("deepseek-coder")).unwrap_err();
        assert!(error.to_string().contains("tokenizer.json"), "{error}");
        let mut llama = metadata("smollm");
        llama.insert(
            "tokenizer.ggml.model".to_owned(),
            Value::String("llama".to_owned()),
        );
        assert!(from_metadata(&llama).is_err());
    }
}
