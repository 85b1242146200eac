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

/// Where the lead-ins at the end of `chunk` start: its last paragraphs when they end in a
/// colon, and so introduce what follows them ("the results were:", "as follows:"). A cut after
/// them parts the introduction from what it introduces. `None` when the chunk does not end in
/// one, or holds nothing else (a list of labels: nothing there is introduced).
pub(crate) fn trailing_lead_ins(chunk: &str) -> Option<usize> {
    let introduces = |paragraph: &str| paragraph.ends_with([':', '：']);
    let mut end = chunk.trim_end().len();
    let mut start = None;
    while let Some(paragraph) = last_paragraph_start(&chunk[..end]) {
        if !introduces(&chunk[paragraph..end]) {
            return start;
        }
        start = Some(paragraph);
        end = chunk[..paragraph].trim_end().len();
    }
    // The first paragraph is left: it keeps the chunk unless it introduces too.
    start.filter(|_| !introduces(&chunk[..end]))
}

/// Where the last paragraph of `text` (which ends in no whitespace) starts: just after its last
/// blank line. `None` when it has none, so that the text is one paragraph.
fn last_paragraph_start(text: &str) -> Option<usize> {
    let mut paragraph = None;
    let mut line_end = text.len();
    while let Some(newline) = text[..line_end].rfind('\n') {
        if text[newline + 1..line_end].trim().is_empty() {
            return paragraph;
        }
        paragraph = Some(newline + 1);
        line_end = newline;
    }
    None
}

/// Marks that end a sentence: Latin's, the ideographic full stop and full-width marks of
/// Chinese and Japanese, and the Devanagari danda and double danda.
const FINAL_MARKS: [char; 9] = ['.', '!', '?', '。', '｡', '！', '？', '।', '॥'];

/// Whether `c` ends a sentence wherever it stands. Latin's marks end one only before a space
/// (`e.g.`, `3.5`); these are written with no space after them, and never inside a word.
fn ends_sentence_unspaced(c: char) -> bool {
    FINAL_MARKS[3..].contains(&c)
}

/// Characters that may close a sentence after its final mark: quotes and brackets, Japanese's
/// corner brackets among them.
fn is_closer(c: char) -> bool {
    matches!(
        c,
        '"' | '\''
            | ')'
            | ']'
            | '}'
            | '’'
            | '”'
            | '»'
            | '」'
            | '』'
            | '）'
            | '】'
            | '〕'
            | '〉'
            | '》'
    )
}

/// Whether `chunk` ends with a sentence's final mark (perhaps followed by closing quotes or
/// brackets).
fn ends_sentence(chunk: &str) -> bool {
    let trimmed = chunk.trim_end().trim_end_matches(is_closer);
    trimmed.ends_with(FINAL_MARKS)
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
/// whitespace, or by anything for the marks written without a space; or a blank line.
fn sentence_ends(text: &str) -> impl Iterator<Item = usize> + '_ {
    text.char_indices().filter_map(move |(i, c)| {
        let next = i + c.len_utf8();
        let rest = &text[next..];
        if rest.starts_with(is_closer) {
            return None; // The sentence ends after its closers.
        }
        let mark = if is_closer(c) {
            text[..i].trim_end_matches(is_closer).chars().next_back()
        } else {
            Some(c)
        };
        let ends = mark.is_some_and(|mark| {
            FINAL_MARKS.contains(&mark)
                && (ends_sentence_unspaced(mark) || rest.starts_with(char::is_whitespace))
        });
        let blank = c == '\n' && rest.trim_start_matches([' ', '\t']).starts_with('\n');
        (ends || blank).then_some(next)
    })
}

/// Whether `c` is a letter of a script written without spaces between words (Chinese,
/// Japanese, Thai, Lao, Khmer, Myanmar): each such letter counts as a word of its own.
fn is_unspaced_letter(c: char) -> bool {
    crate::search::is_han_or_kana(c)
        || matches!(c,
            '\u{0E00}'..='\u{0EFF}' // Thai and Lao
            | '\u{1000}'..='\u{109F}' // Myanmar
            | '\u{1780}'..='\u{17FF}' // Khmer
        )
}

/// Byte offsets in `text` where words start: a run of characters between spaces is one word,
/// except that every letter of a script written without spaces starts one of its own.
/// Punctuation stays with the word before it.
fn word_starts(text: &str) -> impl DoubleEndedIterator<Item = usize> + '_ {
    let mut previous = None;
    let starts: Vec<usize> = text
        .char_indices()
        .filter_map(|(i, c)| {
            let starts = !c.is_whitespace()
                && (is_unspaced_letter(c) || previous.is_none_or(char::is_whitespace));
            previous = Some(c);
            starts.then_some(i)
        })
        .collect();
    starts.into_iter()
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

/// The last `count` words of `text` (as [`word_starts`] counts them).
fn last_words(text: &str, count: usize) -> &str {
    let text = text.trim_end();
    match word_starts(text).rev().nth(count.saturating_sub(1)) {
        Some(start) if count > 0 => &text[start..],
        _ => text,
    }
}

/// The first `count` words of `text` (as [`word_starts`] counts them).
fn first_words(text: &str, count: usize) -> &str {
    let text = text.trim_start();
    match word_starts(text).nth(count) {
        Some(end) => text[..end].trim_end(),
        None => text,
    }
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
    fn japanese_and_hindi_sentence_ends_are_seams() {
        let text = "各当事者は三十日前に通知します。契約は終了します。";
        assert_eq!(
            kind(text, "通知します。", "契約は", &[]),
            SeamKind::SentenceEnd
        );
        assert_eq!(
            kind(text, "各当事者は", "三十日", &[]),
            SeamKind::MidSentence
        );
        let quoted = "彼は「止まれ。」と言った。次の文。";
        assert_eq!(
            kind(quoted, "彼は「止まれ。」", "と言った", &[]),
            SeamKind::SentenceEnd,
            "a mark inside closing brackets ends a sentence as Latin's do"
        );
        let hindi = "सूचना तीस दिन पहले दी जाएगी। अनुबंध समाप्त होगा॥ अंत";
        assert_eq!(kind(hindi, "दी जाएगी।", "अनुबंध", &[]), SeamKind::SentenceEnd);
        assert_eq!(kind(hindi, "समाप्त होगा॥", "अंत", &[]), SeamKind::SentenceEnd);
        assert_eq!(kind(hindi, "सूचना तीस", "दिन", &[]), SeamKind::MidSentence);
    }

    #[test]
    fn seam_text_reads_sentences_and_words_without_spaces() {
        let text = "前の文です。隣接するチャンクを追加します。次の文です。";
        let (a, b) = ranges(
            text,
            "前の文です。隣接する",
            "チャンクを追加します。次の文です。",
        );
        assert_eq!(
            seam_text(text, &a, &b, 30),
            "隣接する チャンクを追加します。"
        );
        // Each ideograph and kana is a word: at most three on each side.
        assert_eq!(seam_text(text, &a, &b, 3), "接する チャン");
        let hindi = "पहला वाक्य। पड़ोसी खंड को जोड़ा जाता है। अगला।";
        let (a, b) = ranges(hindi, "पहला वाक्य। पड़ोसी खंड", "को जोड़ा जाता है। अगला।");
        assert_eq!(seam_text(hindi, &a, &b, 30), "पड़ोसी खंड को जोड़ा जाता है।");
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

    #[test]
    fn paragraphs_ending_in_a_colon_are_lead_ins() {
        let english = "Results.\n\nOn 160 queries\nSCAR achieved:  \n";
        assert_eq!(trailing_lead_ins(english), english.find("On 160"));
        let hindi = "मेट्रिक्स: रिकॉल।\n\n160 क्वेरीज़ पर, SCAR ने प्राप्त किया:";
        assert_eq!(trailing_lead_ins(hindi), hindi.find("160"));
        // Full-width colons; two introductions in a row go on together.
        let japanese = "評価しました。\n\n意義と主張\n\n主な貢献は以下の通りです：\n\n詳細：";
        assert_eq!(trailing_lead_ins(japanese), japanese.find("主な"));
    }

    #[test]
    fn a_colon_inside_or_a_chunk_of_nothing_else_is_no_lead_in() {
        for chunk in [
            "Note: the fee is due.\n\nTickets: 8 euros.",
            "One paragraph that ends in a colon:",
            "Parties:\n\nTerm:\n\nFees:",
            "A line that ends in a colon:\nand one that does not.",
            "",
        ] {
            assert_eq!(trailing_lead_ins(chunk), None, "{chunk:?}");
        }
    }
}
