//! How text becomes the words BM25 counts, for a chunk and for a question alike.
//!
//! tantivy's default tokenizer cuts runs of letters and digits. That serves English, but not
//! Japanese or Chinese, written without spaces (a whole sentence would be one word), nor
//! Devanagari, whose virama and nukta are marks rather than letters (`प्रस्ताव` fell into three
//! pieces). [`Analyzer::Multilingual`] keeps marks inside words and cuts Han and kana into
//! overlapping pairs of characters, as search engines without a dictionary do for those
//! scripts; in text of letters and digits alone it cuts the same words as the default.

use serde::{Deserialize, Serialize};
use tantivy::tokenizer::{
    LowerCaser, RemoveLongFilter, TextAnalyzer, Token, TokenStream, Tokenizer,
};
use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

/// Words of 40 bytes or more are dropped, as tantivy's default does: they are rarely words.
const LONGEST_WORD: usize = 40;

/// How an index cuts text into the words BM25 counts. The index records it; a question is cut
/// the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Analyzer {
    /// tantivy's default: runs of letters and digits, lowercased. Indexes made before the
    /// analyzer was recorded use it.
    #[default]
    LetterRuns,
    /// Words in any script: runs of letters, digits and marks, lowercased and NFKC-normalised,
    /// with Han and kana cut into overlapping pairs of characters.
    Multilingual,
}

impl Analyzer {
    /// The analyzer new indexes and stores use.
    pub const CURRENT: Self = Self::Multilingual;

    /// The name tantivy knows the analyzer by in an index's schema.
    #[must_use]
    pub fn tantivy_name(self) -> &'static str {
        match self {
            Self::LetterRuns => "default",
            Self::Multilingual => "scar_multilingual",
        }
    }

    /// A short label for people: `letter runs`, `multilingual`.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::LetterRuns => "letter runs",
            Self::Multilingual => "multilingual",
        }
    }

    /// The tantivy analyzer that cuts text this way.
    #[must_use]
    pub fn text_analyzer(self) -> TextAnalyzer {
        match self {
            Self::LetterRuns => {
                TextAnalyzer::builder(tantivy::tokenizer::SimpleTokenizer::default())
                    .filter(RemoveLongFilter::limit(LONGEST_WORD))
                    .filter(LowerCaser)
                    .build()
            }
            Self::Multilingual => TextAnalyzer::builder(ScriptTokenizer)
                .filter(RemoveLongFilter::limit(LONGEST_WORD))
                .filter(LowerCaser)
                .build(),
        }
    }

    /// The words BM25 reads in `text`, in order: for a store that ranks the same words
    /// elsewhere, and for questions.
    #[must_use]
    pub fn words(self, text: &str) -> Vec<String> {
        let mut analyzer = self.text_analyzer();
        let mut stream = analyzer.token_stream(text);
        let mut words = Vec::new();
        while stream.advance() {
            words.push(stream.token().text.clone());
        }
        words
    }

    /// `question` as tantivy's query parser should read it: the parser asks for the words of
    /// one run between spaces as a phrase (`user-id`, `3.10.7.4`), which would ask for the
    /// pairs of a Japanese sentence all together, so each run holding Han or kana is written
    /// as its words apart. Other runs are left as they are.
    #[must_use]
    pub fn for_parser(self, question: &str) -> String {
        if self == Self::LetterRuns {
            return question.to_owned();
        }
        question
            .split_whitespace()
            .map(|run| {
                if run.chars().any(|c| class(c) == Class::Paired) {
                    self.words(run).join(" ")
                } else {
                    run.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What a character is to [`ScriptTokenizer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// A letter or digit of a script written with spaces between words.
    Letter,
    /// A Han character or kana: words are not marked, so pairs of characters stand for them.
    Paired,
    /// A combining mark (Devanagari's vowel signs, virama and nukta; the voiced-sound marks of
    /// kana): part of the character before it.
    Mark,
    /// Anything else: spaces and punctuation, which separate words.
    Separator,
}

/// Whether `c` is a Han character or a kana (not their punctuation or combining marks):
/// letters of Chinese and Japanese, written without spaces between words.
pub(crate) fn is_han_or_kana(c: char) -> bool {
    matches!(c,
        '\u{3041}'..='\u{3096}' | '\u{309D}'..='\u{309F}' // hiragana
        | '\u{30A1}'..='\u{30FA}' | '\u{30FC}'..='\u{30FF}' // katakana, with its long-vowel mark
        | '\u{31F0}'..='\u{31FF}'
        | '\u{3005}' | '\u{3007}' // 々 and 〇
        | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}'
        | '\u{FF66}'..='\u{FF9D}' // half-width katakana
        | '\u{20000}'..='\u{3FFFF}')
}

fn class(c: char) -> Class {
    if is_han_or_kana(c) {
        return Class::Paired;
    }
    if matches!(c, '\u{FF9E}' | '\u{FF9F}' | '\u{3099}'..='\u{309C}') {
        return Class::Mark;
    }
    match get_general_category(c) {
        GeneralCategory::NonspacingMark
        | GeneralCategory::SpacingMark
        | GeneralCategory::EnclosingMark => Class::Mark,
        _ if c.is_alphanumeric() => Class::Letter,
        _ => Class::Separator,
    }
}

/// Cuts text into words by script: runs of letters, digits and marks are words; runs of Han
/// and kana give every pair of neighbouring characters (a lone one stands alone). Each word is
/// NFKC-normalised, so full-width letters and half-width kana meet their usual forms.
#[derive(Debug, Clone, Default)]
struct ScriptTokenizer;

/// The words of one text, cut in advance.
struct ScriptTokens {
    tokens: std::vec::IntoIter<Token>,
    current: Token,
}

impl Tokenizer for ScriptTokenizer {
    type TokenStream<'a> = ScriptTokens;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> ScriptTokens {
        ScriptTokens {
            tokens: script_tokens(text).into_iter(),
            current: Token::default(),
        }
    }
}

impl TokenStream for ScriptTokens {
    fn advance(&mut self) -> bool {
        match self.tokens.next() {
            Some(token) => {
                self.current = token;
                true
            }
            None => false,
        }
    }

    fn token(&self) -> &Token {
        &self.current
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.current
    }
}

fn script_tokens(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut push = |range: std::ops::Range<usize>| {
        tokens.push(Token {
            offset_from: range.start,
            offset_to: range.end,
            position: tokens.len(),
            text: text[range].nfkc().collect(),
            position_length: 1,
        });
    };
    // The run being read: letters (one word) or paired characters (each with its marks).
    let mut word: Option<usize> = None;
    let mut paired: Vec<std::ops::Range<usize>> = Vec::new();
    let flush_paired = |paired: &mut Vec<std::ops::Range<usize>>,
                        push: &mut dyn FnMut(std::ops::Range<usize>)| {
        match paired.as_slice() {
            [] => {}
            [one] => push(one.clone()),
            many => {
                for pair in many.windows(2) {
                    push(pair[0].start..pair[1].end);
                }
            }
        }
        paired.clear();
    };
    for (at, c) in text.char_indices() {
        let end = at + c.len_utf8();
        match class(c) {
            Class::Letter => {
                flush_paired(&mut paired, &mut push);
                word.get_or_insert(at);
            }
            Class::Paired => {
                if let Some(start) = word.take() {
                    push(start..at);
                }
                paired.push(at..end);
            }
            Class::Mark => {
                if let Some(last) = paired.last_mut() {
                    last.end = end;
                } else {
                    word.get_or_insert(at);
                }
            }
            Class::Separator => {
                if let Some(start) = word.take() {
                    push(start..at);
                }
                flush_paired(&mut paired, &mut push);
            }
        }
    }
    if let Some(start) = word {
        push(start..text.len());
    }
    flush_paired(&mut paired, &mut push);
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letter_runs_are_tantivys_default() {
        let long = "x".repeat(40);
        assert_eq!(
            Analyzer::LetterRuns.words(&format!("TCP/IP user-id 1.5 Über {long} ok")),
            ["tcp", "ip", "user", "id", "1", "5", "über", "ok"]
        );
    }

    #[test]
    fn multilingual_cuts_latin_text_as_the_default_does() {
        let text = "TCP/IP user-id 1.5 Über, Kayaks cost 8 euros (§ 4.2) — naïve façade's x2";
        assert_eq!(
            Analyzer::Multilingual.words(text),
            Analyzer::LetterRuns.words(text)
        );
    }

    #[test]
    fn devanagari_words_keep_their_marks() {
        assert_eq!(
            Analyzer::Multilingual.words("यह प्रस्ताव, पड़ोसी खंडों को जोड़ता है।"),
            ["यह", "प्रस्ताव", "पड़ोसी", "खंडों", "को", "जोड़ता", "है"]
        );
        // The default cut them at the virama and the nukta.
        assert!(Analyzer::LetterRuns.words("प्रस्ताव").len() > 1);
    }

    #[test]
    fn han_and_kana_are_cut_into_pairs_and_other_scripts_into_words() {
        assert_eq!(
            Analyzer::Multilingual.words("境界断片化とは、SCARの問題です。"),
            [
                "境界", "界断", "断片", "片化", "化と", "とは", "scar", "の問", "問題", "題で",
                "です"
            ]
        );
        assert_eq!(Analyzer::Multilingual.words("「猫」"), ["猫"]);
    }

    #[test]
    fn a_question_gives_the_parser_each_pair_apart_and_other_runs_as_written() {
        assert_eq!(
            Analyzer::Multilingual.for_parser("What is TCP's user-id? 境界断片化とは SCARの問題"),
            "What is TCP's user-id? 境界 界断 断片 片化 化と とは scar の問 問題"
        );
        let english = "How does the agreement interpret the phrase 'to the extent'?";
        assert_eq!(Analyzer::Multilingual.for_parser(english), english);
    }

    #[test]
    fn full_width_and_half_width_forms_meet_their_usual_ones() {
        assert_eq!(Analyzer::Multilingual.words("ＡＢＣ１２３"), ["abc123"]);
        assert_eq!(
            Analyzer::Multilingual.words("ｶﾞｲﾄﾞ"),
            Analyzer::Multilingual.words("ガイド")
        );
    }

    #[test]
    fn a_question_meets_the_chunk_it_asks_about() {
        let chunk =
            Analyzer::Multilingual.words("各当事者は三十日前に書面で通知しなければなりません。");
        let question = Analyzer::Multilingual.words("通知は何日前ですか？");
        assert!(question.iter().any(|w| w == "通知"));
        assert!(question.iter().any(|w| w == "日前"));
        assert!(question.iter().filter(|w| chunk.contains(w)).count() >= 2);
    }
}
