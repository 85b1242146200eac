//! The prompt built from a retrieved context, and the citations read back from an answer.

use std::fmt::Write;

use scar_core::ChunkId;
use scar_retrieve::SearchReport;
use serde::{Deserialize, Serialize};

/// What the model is told to do with the sources.
const SYSTEM: &str = "You answer questions using only the numbered sources given with the \
question. Cite each statement with the number of its source in square brackets, like [1] or \
[2][3]. If the sources do not hold the answer, say so and do not guess.";

/// One numbered source in the prompt: a chunk of the context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// The number the answer cites it by, from 1.
    pub number: usize,
    /// The chunk.
    pub chunk: ChunkId,
    /// Its document's path.
    pub document: String,
    /// Its place in the document.
    pub ordinal: u32,
    /// Where it is, as it follows the file's name: `¶3`, `¶3, p. 2`, `› notes.md ¶3`.
    #[serde(default)]
    pub place: String,
}

/// A chat prompt: the instruction, the sources with the question, and what the numbers mean.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    /// The system message.
    pub system: String,
    /// The user message: the numbered sources, then the question.
    pub user: String,
    /// The sources in the order they are numbered.
    pub sources: Vec<Source>,
}

impl Prompt {
    /// Numbers the context chunks in document order (the order the report holds them in) and
    /// puts the question after them, where small models attend best.
    #[must_use]
    pub fn from_report(report: &SearchReport) -> Self {
        let mut user = String::from("Sources:\n");
        let mut sources = Vec::with_capacity(report.chunks.len());
        for (i, chunk) in report.chunks.iter().enumerate() {
            let number = i + 1;
            let heading = if chunk.heading_path.is_empty() {
                String::new()
            } else {
                format!(" ({})", chunk.heading_path)
            };
            // The file name is enough for the model and for the reader; the full path stays in
            // `sources`.
            let name = chunk.name();
            let _ = write!(
                user,
                "\n[{number}] {name}{heading}\n{}\n",
                chunk.text.trim()
            );
            sources.push(Source {
                number,
                chunk: chunk.id,
                document: chunk.document.clone(),
                ordinal: chunk.ordinal,
                place: chunk.place(),
            });
        }
        let _ = write!(user, "\nQuestion: {}", report.query.trim());
        Self {
            system: SYSTEM.to_owned(),
            user,
            sources,
        }
    }

    /// Reads the `[n]` citations of an answer, in order of first appearance, and maps each to
    /// its source; numbers no source carries are returned separately.
    #[must_use]
    pub fn citations(&self, answer: &str) -> Citations {
        let mut citations = Citations::default();
        for number in cited_numbers(answer) {
            match self.sources.get(number.wrapping_sub(1)) {
                Some(source) if !citations.cited.contains(source) => {
                    citations.cited.push(source.clone());
                }
                None if !citations.unknown.contains(&number) => citations.unknown.push(number),
                Some(_) | None => {}
            }
        }
        citations
    }
}

/// The sources an answer cites.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Citations {
    /// Sources cited, in order of first citation.
    pub cited: Vec<Source>,
    /// Numbers cited that no source carries (a model inventing sources).
    pub unknown: Vec<usize>,
}

/// A stretch of answer text: plain, or one `[n]` citation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerPiece<'a> {
    /// Text as the model wrote it.
    Text(&'a str),
    /// A cited source number.
    Cite(usize),
}

/// Splits an answer at its citations: `[2]`, `[1, 3]` (one piece per number), `[1][4]`.
/// Brackets holding anything but numbers stay text.
#[must_use]
pub fn answer_pieces(text: &str) -> Vec<AnswerPiece<'_>> {
    let mut pieces = Vec::new();
    let mut rest = text;
    let mut plain = 0;
    while let Some(open) = rest[plain..].find('[').map(|i| plain + i) {
        let Some(close) = rest[open..].find(']').map(|i| open + i) else {
            break;
        };
        let numbers: Option<Vec<usize>> = rest[open + 1..close]
            .split(',')
            .map(|part| part.trim().parse().ok())
            .collect();
        match numbers {
            Some(numbers) => {
                if open > 0 {
                    pieces.push(AnswerPiece::Text(&rest[..open]));
                }
                pieces.extend(numbers.into_iter().map(AnswerPiece::Cite));
                rest = &rest[close + 1..];
                plain = 0;
            }
            None => plain = open + 1,
        }
    }
    if !rest.is_empty() {
        pieces.push(AnswerPiece::Text(rest));
    }
    pieces
}

/// Every number cited, in order.
pub(crate) fn cited_numbers(text: &str) -> Vec<usize> {
    answer_pieces(text)
        .into_iter()
        .filter_map(|piece| match piece {
            AnswerPiece::Cite(number) => Some(number),
            AnswerPiece::Text(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt_with(sources: usize) -> Prompt {
        Prompt {
            system: String::new(),
            user: String::new(),
            sources: (1..=sources)
                .map(|number| Source {
                    number,
                    chunk: ChunkId(10 + number as u32),
                    document: "a.md".to_owned(),
                    ordinal: number as u32,
                    place: format!("¶{number}"),
                })
                .collect(),
        }
    }

    #[test]
    fn reads_single_grouped_and_adjacent_citations() {
        assert_eq!(
            cited_numbers("Fees apply [2]. Kayaks [1, 3][4]."),
            vec![2, 1, 3, 4]
        );
        assert_eq!(cited_numbers("see [a] and [2"), Vec::<usize>::new());
        assert_eq!(cited_numbers("[[1]]"), vec![1]);
    }

    #[test]
    fn maps_numbers_to_sources_once_and_reports_unknown_ones() {
        let prompt = prompt_with(3);
        let citations = prompt.citations("A [2]. B [2][3]. C [7] [0].");
        let cited: Vec<usize> = citations.cited.iter().map(|s| s.number).collect();
        assert_eq!(cited, vec![2, 3]);
        assert_eq!(citations.cited[0].chunk, ChunkId(12));
        assert_eq!(citations.unknown, vec![7, 0]);
    }

    #[test]
    fn citations_split_out_of_the_text() {
        assert_eq!(
            answer_pieces("Fees apply [2]. Kayaks [1, 3][4]."),
            vec![
                AnswerPiece::Text("Fees apply "),
                AnswerPiece::Cite(2),
                AnswerPiece::Text(". Kayaks "),
                AnswerPiece::Cite(1),
                AnswerPiece::Cite(3),
                AnswerPiece::Cite(4),
                AnswerPiece::Text("."),
            ]
        );
    }

    #[test]
    fn brackets_without_numbers_stay_text() {
        assert_eq!(
            answer_pieces("see [a] and [2"),
            vec![AnswerPiece::Text("see [a] and [2")]
        );
        assert_eq!(
            answer_pieces("[x] [[1]]"),
            vec![
                AnswerPiece::Text("[x] ["),
                AnswerPiece::Cite(1),
                AnswerPiece::Text("]")
            ]
        );
        assert!(answer_pieces("").is_empty());
    }
}
