//! What the chunker knows about each cut between two adjacent chunks: where it fell in the
//! text's structure ([`SeamKind`]) and the few words on either side of it ([`seam_text`]).
//!
//! A cut inside a sentence, a list or a table almost always splits one piece of evidence; a cut
//! at a heading almost never does. Both are read from the document's own text, so they cost
//! nothing at search time.

use std::ops::Range;

use scar_core::SeamKind;

use crate::load::Heading;

/// Classifies the cut between the chunk at `before` and the next one at `after` (byte ranges of
/// `text`; with overlapping chunks the cut is where `after` starts); `headings` are the
/// document's, in text order.
#[must_use]
pub fn seam_kind(
    text: &str,
    before: &Range<usize>,
    after: &Range<usize>,
    headings: &[Heading],
) -> SeamKind {
    let cut = before.end.min(after.start);
    let gap = cut..after.start;
    if headings
        .iter()
        .any(|h| h.offset >= gap.start && h.offset <= gap.end)
    {
        SeamKind::SectionChange
    } else if has_blank_line(&text[gap]) {
        SeamKind::ParagraphBreak
    } else if ends_sentence(&text[before.start.min(cut)..cut]) {
        SeamKind::SentenceEnd
    } else {
        SeamKind::MidSentence
    }
}

/// The text around the cut: the last sentence of `before` and the first sentence of `after`,
/// each cut to at most `max_words` words next to the cut, joined by a space.
#[must_use]
pub fn seam_text(
    text: &str,
    before: &Range<usize>,
    after: &Range<usize>,
    max_words: usize,
) -> String {
    let tail = last_sentence(&text[before.clone()]);
    let head = first_sentence(&text[after.clone()]);
    let tail = last_words(tail, max_words);
    let head = first_words(head, max_words);
    format!("{} {}", tail.trim(), head.trim()).trim().to_owned()
}

/// Characters that may close a sentence after its final mark: quotes and brackets.
fn is_closer(c: char) -> bool {
    matches!(c, '"' | '\'' | ')' | ']' | '}' | '’' | '”' | '»')
}

/// Whether `chunk` ends with a sentence's final mark (perhaps followed by closing quotes or
/// brackets).
fn ends_sentence(chunk: &str) -> bool {
    let trimmed = chunk.trim_end().trim_end_matches(is_closer);
    trimmed.ends_with(['.', '!', '?'])
}

/// Whether `gap` holds an empty line: two line breaks with only spaces between them.
fn has_blank_line(gap: &str) -> bool {
    let mut seen_break = false;
    for c in gap.chars() {
        match c {
            '\n' if seen_break => return true,
            '\n' => seen_break = true,
            c if c.is_whitespace() => {}
            _ => seen_break = false,
        }
    }
    false
}

/// Byte offsets in `text` just past each sentence end: a final mark (and its closers) followed by
/// whitespace, or a blank line.
fn sentence_ends(text: &str) -> impl Iterator<Item = usize> + '_ {
    text.char_indices().filter_map(move |(i, c)| {
        let next = i + c.len_utf8();
        let rest = &text[next..];
        let mark = matches!(c, '.' | '!' | '?')
            || (is_closer(c)
                && text[..i]
                    .trim_end_matches(is_closer)
                    .ends_with(['.', '!', '?']));
        let blank = c == '\n' && rest.trim_start_matches([' ', '\t']).starts_with('\n');
        ((mark && rest.starts_with(char::is_whitespace)) || blank).then_some(next)
    })
}

/// The last sentence of `chunk`, or all of it when it holds one.
fn last_sentence(chunk: &str) -> &str {
    let body = chunk.trim_end();
    let start = sentence_ends(body)
        .filter(|&end| end < body.len())
        .last()
        .unwrap_or(0);
    &body[start..]
}

/// The first sentence of `chunk`, or all of it when it holds one.
fn first_sentence(chunk: &str) -> &str {
    let body = chunk.trim_start();
    let end = sentence_ends(body).next().unwrap_or(body.len());
    &body[..end]
}

/// The last `count` whitespace-separated words of `text`.
fn last_words(text: &str, count: usize) -> &str {
    let text = text.trim_end();
    let mut words = 0;
    let mut in_word = false;
    for (i, c) in text.char_indices().rev() {
        if c.is_whitespace() {
            if in_word {
                words += 1;
                if words == count {
                    return &text[i + c.len_utf8()..];
                }
            }
            in_word = false;
        } else {
            in_word = true;
        }
    }
    text
}

/// The first `count` whitespace-separated words of `text`.
fn first_words(text: &str, count: usize) -> &str {
    let text = text.trim_start();
    let mut words = 0;
    let mut in_word = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if in_word {
                words += 1;
                if words == count {
                    return &text[..i];
                }
            }
            in_word = false;
        } else {
            in_word = true;
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte ranges of `first` and `second` in `text`.
    fn ranges(text: &str, first: &str, second: &str) -> (Range<usize>, Range<usize>) {
        let a = text.find(first).unwrap();
        let b = text[a + first.len()..].find(second).unwrap() + a + first.len();
        (a..a + first.len(), b..b + second.len())
    }

    fn kind(text: &str, first: &str, second: &str, headings: &[Heading]) -> SeamKind {
        let (a, b) = ranges(text, first, second);
        seam_kind(text, &a, &b, headings)
    }

    #[test]
    fn a_cut_inside_a_sentence_or_a_table_continues() {
        let text = "Kayaks cost 8 euros a\ncrossing, paid when you book.";
        assert_eq!(
            kind(text, "Kayaks cost 8 euros a", "crossing, paid", &[]),
            SeamKind::MidSentence
        );
        let table = "Fee      Amount\nKayak    8\nBicycle  4";
        assert_eq!(
            kind(table, "Fee      Amount", "Kayak    8", &[]),
            SeamKind::MidSentence
        );
        let list = "the following:\n(a) consent;";
        assert_eq!(
            kind(list, "the following:", "(a) consent;", &[]),
            SeamKind::MidSentence
        );
    }

    #[test]
    fn sentence_paragraph_and_heading_cuts_are_told_apart() {
        let text = "It sails at nine. Tickets are sold aboard.\n\nThe cafe opens at eight.\n\n# Pets\nDogs travel free.";
        assert_eq!(
            kind(text, "It sails at nine.", "Tickets are", &[]),
            SeamKind::SentenceEnd
        );
        assert_eq!(
            kind(text, "sold aboard.", "The cafe", &[]),
            SeamKind::ParagraphBreak
        );
        let heading = Heading {
            offset: text.find("# Pets").unwrap(),
            level: 1,
            title: "Pets".into(),
        };
        assert_eq!(
            kind(text, "at eight.", "# Pets", std::slice::from_ref(&heading)),
            SeamKind::SectionChange
        );
        // A heading further inside the next chunk does not make the cut a section change.
        assert_eq!(
            kind(text, "sold aboard.", "The cafe", &[heading]),
            SeamKind::ParagraphBreak
        );
    }

    #[test]
    fn overlapping_chunks_are_cut_where_the_next_one_starts() {
        let text = "It sails at nine. Tickets are sold aboard.";
        let before = 0..text.find("sold").unwrap();
        let after = text.find("Tickets").unwrap()..text.len();
        assert_eq!(seam_kind(text, &before, &after, &[]), SeamKind::SentenceEnd);
        let after = text.find("at nine").unwrap()..text.len();
        assert_eq!(seam_kind(text, &before, &after, &[]), SeamKind::MidSentence);
    }

    #[test]
    fn closing_quotes_and_brackets_still_end_a_sentence() {
        let text = "He said \"stop.\" Then he left.";
        assert_eq!(
            kind(text, "He said \"stop.\"", "Then he", &[]),
            SeamKind::SentenceEnd
        );
        let text = "(See Article 4.) Then more.";
        assert_eq!(
            kind(text, "(See Article 4.)", "Then more", &[]),
            SeamKind::SentenceEnd
        );
    }

    #[test]
    fn seam_text_joins_the_sentences_either_side_of_the_cut() {
        let text = "Boats leave hourly. Kayaks cost 8 euros a crossing, paid when you book. \
                    Bicycles travel free.";
        let (a, b) = ranges(
            text,
            "Boats leave hourly. Kayaks cost 8 euros",
            "a crossing, paid when you book. Bicycles travel free.",
        );
        assert_eq!(
            seam_text(text, &a, &b, 30),
            "Kayaks cost 8 euros a crossing, paid when you book."
        );
        // At most three words on each side of the cut.
        assert_eq!(seam_text(text, &a, &b, 3), "cost 8 euros a crossing, paid");
    }

    #[test]
    fn seam_text_stops_at_blank_lines() {
        let text = "Old topic ends here\n\nNew topic starts\nand goes on.\n\nMore.";
        let (a, b) = ranges(
            text,
            "Old topic ends here\n\nNew topic starts",
            "and goes on.\n\nMore.",
        );
        assert_eq!(seam_text(text, &a, &b, 30), "New topic starts and goes on.");
    }
}
