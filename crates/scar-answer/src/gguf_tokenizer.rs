//! A `tokenizers` tokenizer rebuilt from the vocabulary a GGUF file carries.
//!
//! candle's own GGUF tokenizer builds only byte-level BPE, and does not know `SmolLM2`'s
//! pre-tokenizer (`smollm`): it adds a prefix space and keeps digits together, so prompts are
//! tokenized unlike in training. This builds the byte-level BPE (`gpt2`) with the pre-tokenizer
//! each `tokenizer.ggml.pre` names, and the `SentencePiece` BPE (`llama`: Gemma, Mistral, Phi-3)
//! from the pieces' scores.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as Decoders;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::{BPE, Merges, Vocab};
use tokenizers::normalizers::{NormalizerWrapper, Prepend, Replace, Sequence as Normalizers};
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

/// Qwen 2's split: Llama 3's, with every digit on its own.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// `token_type` values in GGUF (llama.cpp's `llama_token_type`).
const NORMAL_TOKEN: i32 = 1;
/// Control tokens (`<|im_start|>`, `<eos>`): matched whole, left out when decoding.
const CONTROL_TOKEN: i32 = 3;
/// User-defined tokens (Gemma's `\n\n`, `<table>`): matched whole, kept when decoding.
const USER_DEFINED_TOKEN: i32 = 4;

/// The word boundary `SentencePiece` writes in place of a space.
const SPACE_MARK: &str = "\u{2581}";

/// Builds the tokenizer from GGUF metadata.
pub fn from_metadata(metadata: &HashMap<String, Value>) -> Result<Tokenizer> {
    let text = |key: &str| metadata.get(key).and_then(|v| v.to_string().ok());
    match text("tokenizer.ggml.model").map_or("", String::as_str) {
        "gpt2" => byte_level_bpe(metadata),
        "llama" => sentencepiece_bpe(metadata),
        kind => Err(unsupported(format!(
            "tokenizer.ggml.model = {kind:?} (byte-level BPE, \"gpt2\", and SentencePiece, \"llama\", \
             are built from GGUF); put the model's tokenizer.json next to the GGUF file"
        ))),
    }
}

fn unsupported(reason: String) -> AnswerError {
    AnswerError::UnsupportedTokenizer {
        reason,
        source: None,
    }
}

fn refused(reason: &str, source: tokenizers::Error) -> AnswerError {
    AnswerError::UnsupportedTokenizer {
        reason: reason.to_owned(),
        source: Some(source),
    }
}

/// GPT-2 style BPE over bytes, with the merges the file lists.
fn byte_level_bpe(metadata: &HashMap<String, Value>) -> Result<Tokenizer> {
    let text = |key: &str| metadata.get(key).and_then(|v| v.to_string().ok());
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
    // A regex split, then bytes mapped to printable characters without a prefix space.
    let split_then_bytes = |pattern: &str, name: &str| {
        let split = Split::new(
            SplitPattern::Regex(pattern.to_owned()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| refused(&format!("{name}'s split pattern is refused"), e))?;
        Ok::<_, AnswerError>(Sequence::new(vec![
            PreTokenizerWrapper::Split(split),
            PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, false)),
        ]))
    };
    let pre = text("tokenizer.ggml.pre").map_or("default", String::as_str);
    let (pre_tokenizer, ignore_merges) = match pre {
        "smollm" => (
            Sequence::new(vec![
                PreTokenizerWrapper::Digits(Digits::new(true)),
                PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true)),
            ]),
            false,
        ),
        "llama-bpe" => (split_then_bytes(LLAMA3_SPLIT, "Llama 3")?, true),
        "qwen2" => (split_then_bytes(QWEN2_SPLIT, "Qwen 2")?, false),
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
    add_whole_tokens(
        &mut tokenizer,
        &token_types(metadata, tokens.len()),
        &tokens,
    )?;
    Ok(tokenizer)
}

/// `SentencePiece` BPE: spaces become `▁`, pieces merge in the order of their scores, and a
/// character outside the vocabulary falls back to its bytes (`<0x41>`). GGUF keeps the scores,
/// not the merges, so a merge is listed for every way a piece splits into two others, ranked by
/// the merged piece's score: the pair `SentencePiece` would join first comes first.
fn sentencepiece_bpe(metadata: &HashMap<String, Value>) -> Result<Tokenizer> {
    let tokens = string_array(metadata, "tokenizer.ggml.tokens")?;
    let scores: Vec<f32> = metadata
        .get("tokenizer.ggml.scores")
        .and_then(|v| v.to_vec().ok())
        .ok_or_else(|| unsupported("no tokenizer.ggml.scores in the GGUF metadata".to_owned()))?
        .iter()
        .map(|v| v.to_f32().unwrap_or(f32::MIN))
        .collect();
    let types = token_types(metadata, tokens.len());
    if scores.len() != tokens.len() {
        return Err(unsupported(format!(
            "{} tokens but {} scores",
            tokens.len(),
            scores.len()
        )));
    }
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(id, token)| (token.clone(), id as u32))
        .collect();
    let mut ranked: Vec<(usize, String, String)> = Vec::new();
    for (id, piece) in tokens.iter().enumerate() {
        if types[id] != NORMAL_TOKEN {
            continue;
        }
        for (split, _) in piece.char_indices().skip(1) {
            let (left, right) = piece.split_at(split);
            let normal = |part: &str| {
                vocab
                    .get(part)
                    .is_some_and(|&i| types[i as usize] == NORMAL_TOKEN)
            };
            if normal(left) && normal(right) {
                ranked.push((id, left.to_owned(), right.to_owned()));
            }
        }
    }
    // Highest score first; ties in the vocabulary's order, as SentencePiece breaks them.
    ranked.sort_by(|a, b| scores[b.0].total_cmp(&scores[a.0]).then(a.0.cmp(&b.0)));
    let merges: Merges = ranked.into_iter().map(|(_, a, b)| (a, b)).collect();
    let unknown = metadata
        .get("tokenizer.ggml.unknown_token_id")
        .and_then(|v| v.to_u32().ok())
        .and_then(|id| tokens.get(id as usize));
    let mut builder = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .byte_fallback(true);
    if let Some(unknown) = unknown {
        builder = builder.unk_token(unknown.clone());
    }
    let bpe = builder
        .build()
        .map_err(|e| refused("the vocabulary is refused", e))?;
    let space_prefix = metadata
        .get("tokenizer.ggml.add_space_prefix")
        .and_then(|v| v.to_bool().ok())
        .unwrap_or(true);
    let spaces = Replace::new(" ", SPACE_MARK)
        .map_err(|e| refused("the space replacement is refused", e))?;
    let mut normalizers = Vec::new();
    if space_prefix {
        normalizers.push(NormalizerWrapper::Prepend(Prepend::new(
            SPACE_MARK.to_owned(),
        )));
    }
    normalizers.push(NormalizerWrapper::Replace(spaces));
    let mut decoders = vec![
        DecoderWrapper::Replace(
            Replace::new(SPACE_MARK, " ")
                .map_err(|e| refused("the space replacement is refused", e))?,
        ),
        DecoderWrapper::ByteFallback(ByteFallback::new()),
        DecoderWrapper::Fuse(Fuse::new()),
    ];
    if space_prefix {
        decoders.push(DecoderWrapper::Strip(Strip::new(' ', 1, 0)));
    }
    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer
        .with_normalizer(Some(Normalizers::new(normalizers)))
        .map_err(|e| refused("the space normalizer is refused", e))?;
    tokenizer.with_decoder(Some(Decoders::new(decoders)));
    add_whole_tokens(&mut tokenizer, &types, &tokens)?;
    Ok(tokenizer)
}

/// Each token's `token_type`, normal where the file gives none.
fn token_types(metadata: &HashMap<String, Value>, count: usize) -> Vec<i32> {
    let mut types: Vec<i32> = metadata
        .get("tokenizer.ggml.token_type")
        .and_then(|v| v.to_vec().ok())
        .map(|types| {
            types
                .iter()
                .map(|t| t.to_i32().unwrap_or(NORMAL_TOKEN))
                .collect()
        })
        .unwrap_or_default();
    types.resize(count, NORMAL_TOKEN);
    types
}

/// Control and user-defined tokens are matched whole in the text, never split into pieces.
fn add_whole_tokens(tokenizer: &mut Tokenizer, types: &[i32], tokens: &[String]) -> Result<()> {
    let whole = |kind: i32| -> Vec<AddedToken> {
        types
            .iter()
            .zip(tokens)
            .filter(|(t, _)| **t == kind)
            .map(|(_, token)| AddedToken::from(token.clone(), kind == CONTROL_TOKEN))
            .collect()
    };
    tokenizer
        .add_special_tokens(whole(CONTROL_TOKEN))
        .map_err(|e| refused("the control tokens are refused", e))?;
    tokenizer
        .add_tokens(whole(USER_DEFINED_TOKEN))
        .map_err(|e| refused("the user-defined tokens are refused", e))?;
    Ok(())
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
        let mut t5 = metadata("smollm");
        t5.insert(
            "tokenizer.ggml.model".to_owned(),
            Value::String("t5".to_owned()),
        );
        let error = from_metadata(&t5).unwrap_err();
        assert!(error.to_string().contains("\"t5\""), "{error}");
    }

    #[test]
    fn qwen2_splits_every_digit() {
        let tokenizer = from_metadata(&metadata("qwen2")).unwrap();
        assert_eq!(pieces(&tokenizer, "ab 12"), ["ab", "Ġ", "1", "2"]);
    }

    /// A `SentencePiece` vocabulary in the shape Gemma's GGUF has: control, user-defined and
    /// byte tokens, and pieces whose scores set the merge order.
    fn sentencepiece(space_prefix: bool) -> HashMap<String, Value> {
        let mut tokens: Vec<(String, i32, f32)> = vec![
            ("<unk>".to_owned(), 2, 0.0),
            ("<eos>".to_owned(), 3, 0.0),
            ("<start_of_turn>".to_owned(), 3, 0.0),
            ("\n".to_owned(), 4, 0.0),
        ];
        tokens.extend((0..=255u8).map(|b| (format!("<0x{b:02X}>"), 6, 0.0)));
        // "bc" outscores "ab", so "abc" is "a" + "bc"; "▁ab" outscores both.
        for (piece, score) in [
            ("▁", -1.0),
            ("a", -2.0),
            ("b", -2.0),
            ("c", -2.0),
            ("▁ab", -4.0),
            ("bc", -5.0),
            ("ab", -6.0),
            ("▁a", -7.0),
        ] {
            tokens.push((piece.to_owned(), 1, score));
        }
        HashMap::from([
            (
                "tokenizer.ggml.model".to_owned(),
                Value::String("llama".to_owned()),
            ),
            (
                "tokenizer.ggml.tokens".to_owned(),
                Value::Array(tokens.iter().map(|t| Value::String(t.0.clone())).collect()),
            ),
            (
                "tokenizer.ggml.token_type".to_owned(),
                Value::Array(tokens.iter().map(|t| Value::I32(t.1)).collect()),
            ),
            (
                "tokenizer.ggml.scores".to_owned(),
                Value::Array(tokens.iter().map(|t| Value::F32(t.2)).collect()),
            ),
            ("tokenizer.ggml.unknown_token_id".to_owned(), Value::U32(0)),
            (
                "tokenizer.ggml.add_space_prefix".to_owned(),
                Value::Bool(space_prefix),
            ),
        ])
    }

    #[test]
    fn sentencepiece_merges_the_best_scored_pair_first() {
        let tokenizer = from_metadata(&sentencepiece(false)).unwrap();
        assert_eq!(pieces(&tokenizer, "abc ab"), ["a", "bc", "▁ab"]);
        let ids = tokenizer
            .encode("abc ab", false)
            .unwrap()
            .get_ids()
            .to_vec();
        assert_eq!(tokenizer.decode(&ids, true).unwrap(), "abc ab");
    }

    #[test]
    fn sentencepiece_falls_back_to_bytes_and_keeps_whole_tokens() {
        let tokenizer = from_metadata(&sentencepiece(false)).unwrap();
        let encoding = tokenizer.encode("<start_of_turn>é\nab", false).unwrap();
        assert_eq!(
            encoding.get_tokens(),
            ["<start_of_turn>", "<0xC3>", "<0xA9>", "\n", "ab"]
        );
        // The control token is left out, the user-defined newline kept.
        assert_eq!(tokenizer.decode(encoding.get_ids(), true).unwrap(), "é\nab");
    }

    #[test]
    fn sentencepiece_space_prefix_is_added_and_taken_off() {
        let tokenizer = from_metadata(&sentencepiece(true)).unwrap();
        assert_eq!(pieces(&tokenizer, "ab"), ["▁ab"]);
        let ids = tokenizer.encode("ab", false).unwrap().get_ids().to_vec();
        assert_eq!(tokenizer.decode(&ids, true).unwrap(), "ab");
    }
}
