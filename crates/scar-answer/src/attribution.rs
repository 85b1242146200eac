//! Every sentence of an answer traced to the context chunk that supports it best, found by the
//! embedding model that built the index and by the words the sentence shares with the chunk,
//! not taken from the model's word: a sentence whose words are mostly absent from every chunk
//! is flagged as not found in the sources, and a `[n]` the model wrote that points elsewhere is
//! shown as a disagreement.

use std::collections::HashSet;

use scar_core::ChunkId;
use scar_retrieve::{ChunkStore, Retriever};
use serde::{Deserialize, Serialize};

use crate::prompt::cited_numbers;
use crate::{AnswerError, Prompt, Result};

/// The share of a sentence's content words that must appear in a chunk for the sentence to
/// count as found there: most of them.
pub const FOUND_SHARE: f32 = 0.5;

/// Words that carry no claim of their own, left out when sentences and chunks are compared.
const STOPWORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "are",
    "but",
    "not",
    "you",
    "your",
    "with",
    "this",
    "that",
    "from",
    "have",
    "has",
    "was",
    "were",
    "will",
    "can",
    "its",
    "it's",
    "they",
    "them",
    "their",
    "there",
    "then",
    "than",
    "which",
    "what",
    "when",
    "where",
    "who",
    "how",
    "also",
    "into",
    "onto",
    "any",
    "all",
    "each",
    "per",
    "our",
    "out",
    "off",
    "over",
    "under",
    "about",
    "answer",
    "source",
    "sources",
    "according",
    "based",
];

/// One sentence of an answer and the source that supports it best.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SentenceSupport {
    /// The sentence as the model wrote it.
    pub text: String,
    /// Its character range in the answer text, half-open.
    pub chars: [usize; 2],
    /// The source (numbered as the prompt numbers them) that supports it best.
    pub source: usize,
    /// Cosine between the sentence's embedding and that source chunk's stored vector.
    pub similarity: f32,
    /// The share of the sentence's content words that the chunk holds.
    pub shared_words: f32,
    /// `shared_words` reaches [`FOUND_SHARE`]: the sentence is found in that source.
    pub found: bool,
    /// The sources the model cited in this sentence with `[n]`.
    pub cited: Vec<usize>,
}

impl SentenceSupport {
    /// The model cited sources, and the one found to support the sentence is not among them.
    #[must_use]
    pub fn disagrees(&self) -> bool {
        self.found && !self.cited.is_empty() && !self.cited.contains(&self.source)
    }
}

/// Traces each sentence of `answer` to the source of `prompt` that supports it best: the one
/// with the highest mean of embedding similarity and shared words. Sentences without content
/// words ("Yes.") claim nothing and are left out; so is everything when there are no sources.
pub fn attribute<S: ChunkStore>(
    answer: &str,
    prompt: &Prompt,
    retriever: &Retriever<S>,
) -> Result<Vec<SentenceSupport>> {
    let sentences: Vec<(std::ops::Range<usize>, &str)> = sentences(answer)
        .into_iter()
        .map(|range| (range.clone(), &answer[range]))
        .filter(|(_, sentence)| !content_words(&without_citations(sentence)).is_empty())
        .collect();
    if sentences.is_empty() || prompt.sources.is_empty() {
        return Ok(Vec::new());
    }
    let store = retriever.store();
    let cited: Vec<ChunkId> = prompt.sources.iter().map(|source| source.chunk).collect();
    let sources_failed = |error| AnswerError::Sources(Box::new(error));
    let vectors = store.policy_source(&cited).map_err(sources_failed)?;
    let mut sources: Vec<(usize, &[f32], HashSet<String>)> = Vec::new();
    for source in &prompt.sources {
        let chunk = store.stored(source.chunk).map_err(sources_failed)?;
        let words = content_words(&chunk.text).into_iter().collect();
        sources.push((source.number, vectors.embedding(source.chunk), words));
    }
    let texts: Vec<String> = sentences
        .iter()
        .map(|(_, sentence)| without_citations(sentence))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let embeddings = retriever
        .embedder()
        .embed_passages(&refs, &mut |_| {})
        .map_err(|error| AnswerError::Attribution(Box::new(error)))?;
    let mut supports = Vec::with_capacity(sentences.len());
    for (i, ((range, sentence), text)) in sentences.iter().zip(&texts).enumerate() {
        let words = content_words(text);
        let vector = embeddings.row(i);
        let best = sources
            .iter()
            .map(|(number, chunk_vector, chunk_words)| {
                let similarity = dot(vector, chunk_vector);
                let shared = words.iter().filter(|w| chunk_words.contains(*w)).count();
                (*number, similarity, shared as f32 / words.len() as f32)
            })
            .max_by(|a, b| (a.1 + a.2).total_cmp(&(b.1 + b.2)));
        let Some((source, similarity, shared_words)) = best else {
            continue;
        };
        supports.push(SentenceSupport {
            text: (*sentence).to_owned(),
            chars: [
                char_offset(answer, range.start),
                char_offset(answer, range.end),
            ],
            source,
            similarity,
            shared_words,
            found: shared_words >= FOUND_SHARE,
            cited: cited_numbers(sentence),
        });
    }
    Ok(supports)
}

/// Byte ranges of the sentences of `text`: each ends after `.`, `!` or `?` (and any citations
/// and closing quotes right after it) followed by whitespace, or where a block ends (a blank
/// line, a list item); trimmed.
fn sentences(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < text.len() {
        let end = match text.as_bytes()[i] {
            b'\n' if starts_a_block(&text[i + 1..]) => Some(i),
            // The stop of a numbered item's marker (`2. `) does not end a sentence.
            b'.' if is_item_number(&text[start..i]) => None,
            b'.' | b'!' | b'?' => stop_end(text, i + 1),
            _ => None,
        };
        match end {
            Some(end) => {
                push_trimmed(&mut ranges, text, start, end);
                start = end;
                i = end.max(i + 1);
            }
            None => i += 1,
        }
    }
    push_trimmed(&mut ranges, text, start, text.len());
    ranges
}

fn is_item_number(before: &str) -> bool {
    let number = before.trim();
    !number.is_empty() && number.chars().all(|c| c.is_ascii_digit())
}

/// True when the line after a line break starts a new block (a blank line, or a list item):
/// a model's wrapped line does not end its sentence.
fn starts_a_block(next: &str) -> bool {
    let line = next.trim_start_matches([' ', '\t']);
    let numbered = line
        .split_once(". ")
        .is_some_and(|(number, _)| is_item_number(number));
    line.is_empty()
        || line.starts_with('\n')
        || ["- ", "* ", "• "]
            .iter()
            .any(|marker| line.starts_with(marker))
        || numbered
}

/// Where a sentence whose stop comes just before `from` ends: after the citations and closing
/// quotes that follow the stop, if whitespace or the end of the text comes next.
fn stop_end(text: &str, from: usize) -> Option<usize> {
    let mut j = from;
    loop {
        let rest = &text[j..];
        let citation = rest
            .strip_prefix(' ')
            .unwrap_or(rest)
            .strip_prefix('[')
            .and_then(|inside| inside.find(']').map(|close| (&inside[..close], close)))
            .filter(|(numbers, _)| {
                !numbers.is_empty()
                    && numbers
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == ',' || c == ' ')
            });
        if let Some((_, close)) = citation {
            // An optional space, `[`, the numbers, `]`.
            j += usize::from(rest.starts_with(' ')) + 1 + close + 1;
            continue;
        }
        match rest.chars().next() {
            Some(c @ ('"' | '\'' | ')' | '”' | '’')) => j += c.len_utf8(),
            Some(c) if c.is_whitespace() => return Some(j),
            Some(_) => return None,
            None => return Some(j),
        }
    }
}

fn push_trimmed(ranges: &mut Vec<std::ops::Range<usize>>, text: &str, start: usize, end: usize) {
    let piece = &text[start..end];
    let leading = piece.len() - piece.trim_start().len();
    let trimmed = piece.trim();
    if !trimmed.is_empty() {
        ranges.push(start + leading..start + leading + trimmed.len());
    }
}

/// The sentence without its `[n]` citations.
fn without_citations(sentence: &str) -> String {
    crate::prompt::answer_pieces(sentence)
        .into_iter()
        .filter_map(|piece| match piece {
            crate::AnswerPiece::Text(text) => Some(text),
            crate::AnswerPiece::Cite(_) => None,
        })
        .collect()
}

/// Lower-cased words that can carry a claim: numbers, and words of three letters or more that
/// are not [`STOPWORDS`].
fn content_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .filter(|word| {
            word.chars().any(|c| c.is_ascii_digit())
                || (word.chars().count() >= 3 && !STOPWORDS.contains(&word.as_str()))
        })
        .collect()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn char_offset(text: &str, byte: usize) -> usize {
    text[..byte].chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> Vec<&str> {
        sentences(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn sentences_end_at_stops_and_keep_their_citations() {
        assert_eq!(
            split("Fares:\n- A kayak: 8 euros\n- A car: 35 euros, paid on\nboard\n\n2. Done"),
            [
                "Fares:",
                "- A kayak: 8 euros",
                "- A car: 35 euros, paid on\nboard",
                "2. Done"
            ]
        );
        assert_eq!(
            split(
                "A kayak costs 8 euros a crossing [3]. A return trip is 16 euros. [3][4]\nCars pay 35.\"Yes\" she said? ok"
            ),
            [
                "A kayak costs 8 euros a crossing [3].",
                "A return trip is 16 euros. [3][4]",
                "Cars pay 35.\"Yes\" she said?",
                "ok"
            ]
        );
        assert_eq!(
            split("Version 2.5 is out. Fine."),
            ["Version 2.5 is out.", "Fine."]
        );
        assert!(split("  \n ").is_empty());
    }

    #[test]
    fn content_words_keep_numbers_and_drop_filler() {
        assert_eq!(
            content_words("The kayak fee is 8 euros, per the sources."),
            ["kayak", "fee", "8", "euros"]
        );
        assert_eq!(
            without_citations("Costs 8 euros [3], or 16 [1, 4]."),
            "Costs 8 euros , or 16 ."
        );
    }

    #[test]
    fn a_finding_disagrees_only_with_a_citation_that_points_elsewhere() {
        let support = |source, found, cited: Vec<usize>| SentenceSupport {
            text: String::new(),
            chars: [0, 0],
            source,
            similarity: 0.5,
            shared_words: 0.5,
            found,
            cited,
        };
        assert!(support(3, true, vec![1]).disagrees());
        assert!(!support(3, true, vec![1, 3]).disagrees());
        assert!(!support(3, true, vec![]).disagrees());
        assert!(!support(3, false, vec![1]).disagrees());
    }
}
