//! Plain text (and the text layer of a PDF): numbered section headings.

use super::{Heading, collapse_whitespace, lines_with_offsets};

/// Longest line, in characters, that plain-text heading detection accepts.
const MAX_HEADING_CHARS: usize = 100;
/// The name on the line after a bare `Article 89` may be longer: GDPR's run to 163 characters.
const MAX_NAME_CHARS: usize = 200;

/// Numbered section headings in plain text, e.g. `3.10.  Event Processing`, `Article 17` or
/// `PART II`. Precision matters more than recall: a heading must stand as its own paragraph,
/// start at the left margin, and read like a title rather than a sentence.
pub(super) fn headings(text: &str) -> Vec<Heading> {
    let lines: Vec<(usize, &str)> = lines_with_offsets(text).collect();
    let blank = |i: usize| lines.get(i).is_none_or(|(_, line)| line.trim().is_empty());
    let mut headings = Vec::new();
    for (i, &(offset, line)) in lines.iter().enumerate() {
        if i > 0 && !blank(i - 1) {
            continue;
        }
        let Some(NumberedLine { level, bare_label }) = numbered_line(line) else {
            continue;
        };
        let mut title = collapse_whitespace(line);
        let mut last_line = i;
        // A bare `Article 17` or `ARTICLE I` usually has its name on the next line, with or
        // without a blank line between.
        if bare_label {
            let next = if blank(i + 1) { i + 2 } else { i + 1 };
            if let Some(&(_, name)) = lines.get(next)
                && blank(next + 1)
                && is_heading_shaped(name, MAX_NAME_CHARS)
                && is_title(name.trim_end())
                && numbered_title(name.trim_end()).is_none()
            {
                title = format!("{title} {}", collapse_whitespace(name));
                last_line = next;
            }
        }
        // Page headers repeat the title of the section already open; only the first counts.
        let repeats_open_section = headings
            .iter()
            .rev()
            .find(|open: &&Heading| open.level <= level)
            .is_some_and(|open| open.title == title);
        if blank(last_line + 1) && !repeats_open_section {
            headings.push(Heading {
                offset,
                level,
                title,
            });
        }
    }
    headings
}

struct NumberedLine {
    level: u8,
    /// Just a label such as `Article 17`, with no title after the number.
    bare_label: bool,
}

/// Words that introduce a numbered division, with its level in the usual hierarchy of
/// legislation and filings: Part > Chapter > Section > Article > Item (GDPR: `CHAPTER III` >
/// `Section 1` > `Article 12`; a 10-K: `PART II` > `Item 7.`).
const DIVISIONS: &[(&str, u8)] = &[
    ("part", 1),
    ("appendix", 1),
    ("annex", 1),
    ("schedule", 1),
    ("chapter", 2),
    ("section", 3),
    ("article", 4),
    ("item", 5),
];
/// A dotted number after a division word (`Section 5.2`) marks a subdivision: it nests below
/// every division with a plain number, as a contract's `Section 5.2` sits under `ARTICLE V`.
const SUBDIVISION_LEVEL: u8 = 5;

/// A line placed and sized like a heading that holds a [`numbered_title`].
fn numbered_line(line: &str) -> Option<NumberedLine> {
    if !is_heading_shaped(line, MAX_HEADING_CHARS) {
        return None;
    }
    numbered_title(line.trim_end())
}

/// Recognises `3.10.7.4.  Title`, `A.1.  Title`, `Section 5.2 Title`, `Article 17`,
/// `CHAPTER III`, `Item 7A.` and the like.
fn numbered_title(text: &str) -> Option<NumberedLine> {
    if let Some((level, title)) = division_label(text) {
        if title.is_empty() {
            return Some(NumberedLine {
                level,
                bare_label: true,
            });
        }
        // `PART II Item 7` is a running page header saying where the page sits.
        let is_page_header = division_label(title).is_some();
        return (is_title(title) && !is_page_header).then_some(NumberedLine {
            level,
            bare_label: false,
        });
    }
    let (number, title) = split_first_word(text);
    let level = section_number_depth(number)?;
    // A lone number needs a dot (`3.`), or the line could be any sentence that starts with a count.
    let dotted = level > 1 || number.ends_with('.');
    (dotted && is_title(title)).then_some(NumberedLine {
        level,
        bare_label: false,
    })
}

/// A division word and its number, as in `Article 17 …` or `Section 5.2 …`: the division's
/// level and the text after the number.
fn division_label(text: &str) -> Option<(u8, &str)> {
    let (word, rest) = split_first_word(text);
    let &(_, level) = DIVISIONS
        .iter()
        .find(|(name, _)| word.eq_ignore_ascii_case(name))?;
    if !word.starts_with(|c: char| c.is_ascii_uppercase()) {
        return None;
    }
    let (number, title) = split_first_word(rest);
    let level = match division_number_depth(number)? {
        1 => level,
        depth => SUBDIVISION_LEVEL + depth - 1,
    };
    Some((level, title))
}

/// At the left margin, not a table row, and at most `max_chars` long.
fn is_heading_shaped(line: &str, max_chars: usize) -> bool {
    !line.starts_with(char::is_whitespace)
        && !line.contains('|')
        && line.chars().count() <= max_chars
}

/// Starts with a capital and does not end like a sentence or a lead-in to a list.
fn is_title(text: &str) -> bool {
    text.starts_with(char::is_uppercase) && !text.ends_with(['.', ',', ';', ':'])
}

fn split_first_word(text: &str) -> (&str, &str) {
    match text.split_once(char::is_whitespace) {
        Some((word, rest)) => (word, rest.trim_start()),
        None => (text, ""),
    }
}

/// Depth of a dotted section number such as `3.10.7.4.` or `A.1`, at most six levels.
fn section_number_depth(number: &str) -> Option<u8> {
    let number = number.strip_suffix('.').unwrap_or(number);
    let parts: Vec<&str> = number.split('.').collect();
    let is_numeric =
        |part: &&str| (1..=3).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit());
    let appendix_letter =
        parts.len() > 1 && parts[0].len() == 1 && parts[0].bytes().all(|b| b.is_ascii_uppercase());
    let valid = parts.len() <= 6
        && (appendix_letter || is_numeric(&parts[0]))
        && parts[1..].iter().all(is_numeric);
    valid.then_some(parts.len() as u8)
}

/// Depth of the number after a division word: dotted (`5.2`, depth 2), with a letter (`7A`),
/// roman (`III`) or a single letter (`Appendix B`).
fn division_number_depth(number: &str) -> Option<u8> {
    let bare = number.strip_suffix('.').unwrap_or(number);
    let digits = bare.trim_end_matches(|c: char| c.is_ascii_uppercase());
    let with_letter = !digits.is_empty()
        && bare.len() - digits.len() == 1
        && digits.bytes().all(|b| b.is_ascii_digit());
    let roman =
        !bare.is_empty() && bare.len() <= 8 && bare.bytes().all(|b| b"IVXLCDM".contains(&b));
    let letter = bare.len() == 1 && bare.bytes().all(|b| b.is_ascii_uppercase());
    if with_letter || roman || letter {
        Some(1)
    } else {
        section_number_depth(number)
    }
}

#[cfg(test)]
mod tests {
    use crate::load::tests::{assert_offsets_match, load, titles};

    #[test]
    fn rfc_section_headings_are_found() {
        let text = "\
3.  Functional Specification

3.1.  Header Format

   TCP segments are sent as internet datagrams.  The Internet Protocol
   6298.  The text on the RTO in RFC 1122 originally replaced the text

3.10. Event Processing

3.10.7.4.  Other States

A.1.  IP Security Compartment and Precedence

   3.5.  Establishing a Connection
";
        let document = load("rfc9293.txt", text).unwrap();
        assert_eq!(
            titles(&document.headings),
            [
                (1, "3. Functional Specification"),
                (2, "3.1. Header Format"),
                (2, "3.10. Event Processing"),
                (4, "3.10.7.4. Other States"),
                (2, "A.1. IP Security Compartment and Precedence"),
            ]
        );
        assert_offsets_match(&document);
    }

    #[test]
    fn legal_divisions_take_their_name_from_the_next_line() {
        let text = "\
HAVE ADOPTED THIS REGULATION:

CHAPTER III

Rights of the data subject

Section 1

Transparency and modalities

Article 17

Right to erasure (‘right to be forgotten’)

Article 19

Notification obligation regarding rectification or erasure of personal data or restriction of processing

1.   The data subject shall have the right to obtain from the controller the erasure of personal data.

2.   Where the controller has made the personal data public and is obliged pursuant to paragraph 1:

Article 16(2) TFEU mandates the European Parliament

ARTICLE I
DEFINITIONS & INTERPRETATIONS

Section 1.01 Certain Definitions

Item 7. Management's Discussion and Analysis

Item 1A.

Item 1. | Business | 3

PART II
";
        let document = load("gdpr.txt", text).unwrap();
        assert_eq!(
            titles(&document.headings),
            [
                (2, "CHAPTER III Rights of the data subject"),
                (3, "Section 1 Transparency and modalities"),
                (4, "Article 17 Right to erasure (‘right to be forgotten’)"),
                (
                    4,
                    "Article 19 Notification obligation regarding rectification or erasure of \
                     personal data or restriction of processing",
                ),
                (4, "ARTICLE I DEFINITIONS & INTERPRETATIONS"),
                (6, "Section 1.01 Certain Definitions"),
                (5, "Item 7. Management's Discussion and Analysis"),
                (5, "Item 1A."),
                (1, "PART II"),
            ]
        );
        assert_offsets_match(&document);
    }

    #[test]
    fn running_page_headers_are_not_headings() {
        let text = "\
PART II

ITEM 5. MARKET FOR REGISTRANT'S COMMON EQUITY, RELATED STOCKHOLDER MATTERS, AND ISSUER PURCHASES OF EQUITY SECURITIES

ITEM 7. MANAGEMENT'S DISCUSSION AND ANALYSIS

Revenue increased.

PART II Item 7

Operating income increased.

PART II

ITEM 8. FINANCIAL STATEMENTS
";
        let document = load("10k.txt", text).unwrap();
        assert_eq!(
            titles(&document.headings),
            [
                (1, "PART II"),
                (5, "ITEM 7. MANAGEMENT'S DISCUSSION AND ANALYSIS"),
                (5, "ITEM 8. FINANCIAL STATEMENTS"),
            ]
        );
    }

    #[test]
    fn sentences_and_lists_are_not_headings() {
        let text = "\
2016 was the year the regulation passed

1. first item
2. Second item

3.5 million users signed up

Section 5.2 of the agreement applies

Part of the text, continued
Article 5
in the middle of a paragraph

4.  A heading that wraps onto a second line
    because it is long
";
        assert!(load("prose.txt", text).unwrap().headings.is_empty());
    }
}
