//! A judge that needs no model beyond the index's own: each passage scored by the sentence in
//! it that is most similar to the question.

use std::sync::Arc;

use scar_core::dot;
use scar_embed::Embedder;
use unicode_segmentation::UnicodeSegmentation;

use crate::{Candidate, ChunkStore, Rerank, Result};

/// Pieces with fewer words than this are joined to the next: a list marker or a clause number
/// (`(a)`, `Section 3.`) states nothing to compare with a question.
const MIN_SENTENCE_WORDS: usize = 4;

/// Scores each candidate by cos(question, s) for its sentence s closest to the question, with the
/// embedder that built the index. A chunk's own vector averages every sentence in it, so a chunk
/// that answers in one sentence and goes on about something else scores low as a whole; its
/// best sentence does not.
#[derive(Debug)]
pub struct BestSentence {
    embedder: Arc<Embedder>,
}

impl BestSentence {
    /// A judge embedding with `embedder`: the retriever's own
    /// ([`Retriever::shared_embedder`](crate::Retriever::shared_embedder)), so that the question
    /// is embedded as the index expects.
    #[must_use]
    pub fn new(embedder: Arc<Embedder>) -> Self {
        Self { embedder }
    }
}

impl Rerank for BestSentence {
    fn score(
        &self,
        query: &str,
        candidates: &[Candidate],
        store: &dyn ChunkStore,
    ) -> Result<Vec<f32>> {
        let question = self.embedder.embed_query(query)?;
        let mut owners = Vec::new();
        let mut sentences = Vec::new();
        for (at, candidate) in candidates.iter().enumerate() {
            let chunk = store.stored(candidate.id)?;
            for sentence in sentences_of(&chunk.text) {
                owners.push(at);
                sentences.push(sentence);
            }
        }
        // A chunk with no words has no sentence to match: the lowest cosine there is.
        let mut best = vec![-1.0_f32; candidates.len()];
        if sentences.is_empty() {
            return Ok(best);
        }
        let texts: Vec<&str> = sentences.iter().map(String::as_str).collect();
        let embedded = self.embedder.embed_passages(&texts, &mut |_| {})?;
        for (&owner, vector) in owners
            .iter()
            .zip(embedded.data.chunks_exact(embedded.dimension))
        {
            best[owner] = best[owner].max(dot(&question, vector));
        }
        Ok(best)
    }
}

/// `text`'s sentences (Unicode's sentence boundaries), each trimmed, with pieces shorter than
/// [`MIN_SENTENCE_WORDS`] joined to the next.
fn sentences_of(text: &str) -> Vec<String> {
    let mut sentences = Vec::new();
    let mut pending = String::new();
    for piece in text.split_sentence_bounds() {
        pending.push_str(piece);
        if pending.unicode_words().count() >= MIN_SENTENCE_WORDS {
            sentences.push(pending.trim().to_owned());
            pending.clear();
        }
    }
    if !pending.trim().is_empty() {
        match sentences.last_mut() {
            Some(last) => {
                last.push(' ');
                last.push_str(pending.trim());
            }
            None => sentences.push(pending.trim().to_owned()),
        }
    }
    sentences
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_pieces_join_the_sentence_after_them_and_a_short_tail_the_one_before() {
        let text = "Section 3. The buyer pays within thirty days. Late payment accrues \
                    interest at two percent. Done.";
        assert_eq!(
            sentences_of(text),
            [
                "Section 3. The buyer pays within thirty days.",
                "Late payment accrues interest at two percent. Done."
            ]
        );
        // Unicode's rule: a stop before a lower-case word ends no sentence.
        assert_eq!(
            sentences_of("The buyer pays it. (a) first, then more words here.").len(),
            1
        );
    }

    #[test]
    fn a_text_shorter_than_a_sentence_is_one_sentence_and_an_empty_one_none() {
        assert_eq!(sentences_of("  Fees.  "), ["Fees."]);
        assert!(sentences_of(" \n ").is_empty());
    }
}
