//! Rich Text Format (`.rtf`), a plain-text markup read by its own small tokenizer: paragraphs,
//! tables, Unicode and code-page escapes; headings from outline levels and `heading N` styles;
//! fonts, colours, pictures, fields' instructions and other non-text groups left out.

use std::collections::HashMap;

use super::outline::{Outline, level_from_style_name};
use super::zipped::corrupt;
use super::{Heading, LoadError};

/// Groups whose content is not the document's text.
const HIDDEN_DESTINATIONS: &[&str] = &[
    "fonttbl",
    "colortbl",
    "info",
    "pict",
    "object",
    "header",
    "headerl",
    "headerr",
    "headerf",
    "footer",
    "footerl",
    "footerr",
    "footerf",
    "footnote",
    "fldinst",
    "themedata",
    "colorschememapping",
    "latentstyles",
    "datastore",
    "xmlnstbl",
    "listtable",
    "listoverridetable",
    "rsidtbl",
    "generator",
    "revtbl",
    "filetbl",
    "mmathPr",
    "pgdsctbl",
    "annotation",
    "atnid",
    "atnauthor",
    "template",
    "docvar",
    "nonshppict",
    "bkmkstart",
    "bkmkend",
];

pub(super) fn to_text(bytes: &[u8]) -> Result<(String, Vec<Heading>), LoadError> {
    if !bytes.starts_with(b"{\\rtf") {
        return Err(corrupt("RTF", "it does not start with {\\rtf"));
    }
    let mut reader = RtfReader::default();
    reader.read(bytes);
    Ok(reader.finish())
}

/// What a group sets; `{` saves it and `}` restores it.
#[derive(Debug, Clone, Default)]
struct GroupState {
    hidden: bool,
    in_stylesheet: bool,
    style: i32,
    outline_level: Option<u8>,
    in_table: bool,
    /// Fallback characters that follow each `\u` escape (`\ucN`), skipped.
    unicode_fallback: usize,
}

#[derive(Default)]
struct RtfReader {
    state: GroupState,
    saved: Vec<GroupState>,
    outline: Outline,
    paragraph: String,
    row: Vec<String>,
    table: Vec<Vec<String>>,
    /// Heading levels of the stylesheet's styles, by style number.
    style_levels: HashMap<i32, u8>,
    style_name: String,
    /// Fallback characters of the last `\u` still to skip.
    skipping: usize,
}

impl RtfReader {
    fn read(&mut self, bytes: &[u8]) {
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'{' => {
                    self.saved.push(self.state.clone());
                    i += 1;
                }
                b'}' => {
                    if let Some(state) = self.saved.pop() {
                        self.state = state;
                    }
                    i += 1;
                }
                b'\\' => i = self.control(bytes, i + 1),
                b'\r' | b'\n' => i += 1,
                byte => {
                    self.text(windows_1252(byte));
                    i += 1;
                }
            }
        }
    }

    /// Handles the control word or symbol after a `\` at `bytes[i]`; returns where text resumes.
    fn control(&mut self, bytes: &[u8], i: usize) -> usize {
        let Some(&first) = bytes.get(i) else {
            return i;
        };
        if !first.is_ascii_alphabetic() {
            match first {
                b'\'' => {
                    let hex = bytes
                        .get(i + 1..i + 3)
                        .and_then(|h| std::str::from_utf8(h).ok());
                    if let Some(byte) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                        self.text(windows_1252(byte));
                        return i + 3;
                    }
                }
                b'\\' | b'{' | b'}' => self.text(char::from(first)),
                b'~' => self.text('\u{a0}'),
                b'_' => self.text('-'),
                b'*' => self.state.hidden = true,
                b'\r' | b'\n' => self.end_paragraph(),
                _ => {}
            }
            return i + 1;
        }
        let word_end = i + bytes[i..]
            .iter()
            .take_while(|b| b.is_ascii_alphabetic())
            .count();
        let word = std::str::from_utf8(&bytes[i..word_end]).unwrap_or_default();
        let negative = bytes.get(word_end) == Some(&b'-');
        let digits_start = word_end + usize::from(negative);
        let digits_end = digits_start
            + bytes[digits_start..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
        let parameter = std::str::from_utf8(&bytes[digits_start..digits_end])
            .ok()
            .and_then(|digits| digits.parse::<i32>().ok())
            .map(|value| if negative { -value } else { value });
        let mut next = if digits_end > digits_start {
            digits_end
        } else {
            word_end
        };
        // One space after a control word is its delimiter, not text.
        if bytes.get(next) == Some(&b' ') {
            next += 1;
        }
        if word == "bin" {
            let length = usize::try_from(parameter.unwrap_or(0)).unwrap_or(0);
            return next.saturating_add(length).min(bytes.len());
        }
        self.word(word, parameter);
        next
    }

    fn word(&mut self, word: &str, parameter: Option<i32>) {
        let state = &mut self.state;
        match word {
            _ if HIDDEN_DESTINATIONS.contains(&word) => state.hidden = true,
            "stylesheet" => state.in_stylesheet = true,
            "par" | "sect" | "page" => self.end_paragraph(),
            "pard" => {
                state.style = 0;
                state.outline_level = None;
                state.in_table = false;
            }
            "s" => state.style = parameter.unwrap_or(0),
            "outlinelevel" => {
                state.outline_level = parameter.and_then(|level| u8::try_from(level).ok());
            }
            "intbl" => state.in_table = true,
            "cell" => {
                self.row.push(std::mem::take(&mut self.paragraph));
            }
            "row" => {
                let row = std::mem::take(&mut self.row);
                self.table.push(row);
            }
            "uc" => state.unicode_fallback = usize::try_from(parameter.unwrap_or(1)).unwrap_or(1),
            "u" => {
                // A signed 16-bit value: negative numbers stand for code units above 32767.
                let unit = parameter.unwrap_or(0).rem_euclid(65_536);
                let c = char::from_u32(u32::try_from(unit).unwrap_or(0xFFFD)).unwrap_or('\u{fffd}');
                let fallback = state.unicode_fallback;
                self.text(c);
                self.skipping = fallback;
            }
            "line" => self.text('\n'),
            "tab" => self.text('\t'),
            "emdash" => self.text('—'),
            "endash" => self.text('–'),
            "bullet" => self.text('•'),
            "lquote" => self.text('‘'),
            "rquote" => self.text('’'),
            "ldblquote" => self.text('“'),
            "rdblquote" => self.text('”'),
            "emspace" | "enspace" | "qmspace" => self.text(' '),
            _ => {}
        }
    }

    fn text(&mut self, c: char) {
        if self.skipping > 0 {
            self.skipping -= 1;
            return;
        }
        if self.state.hidden {
            return;
        }
        if self.state.in_stylesheet {
            if c == ';' {
                let name = std::mem::take(&mut self.style_name);
                if let Some(level) = level_from_style_name(name.trim()) {
                    self.style_levels.insert(self.state.style, level);
                }
            } else {
                self.style_name.push(c);
            }
            return;
        }
        self.paragraph.push(c);
    }

    fn end_paragraph(&mut self) {
        if self.state.hidden || self.state.in_stylesheet {
            return;
        }
        if self.state.in_table {
            self.paragraph.push(' ');
            return;
        }
        self.flush_table();
        let text = std::mem::take(&mut self.paragraph);
        let level = self
            .state
            .outline_level
            .filter(|&level| level < 9)
            .map(|level| level + 1)
            .or_else(|| self.style_levels.get(&self.state.style).copied());
        match level {
            Some(level) => self.outline.heading(level, &text),
            None => self.outline.paragraph(&text),
        }
    }

    fn flush_table(&mut self) {
        if !self.row.is_empty() {
            let row = std::mem::take(&mut self.row);
            self.table.push(row);
        }
        if !self.table.is_empty() {
            self.outline.table(&std::mem::take(&mut self.table));
        }
    }

    fn finish(mut self) -> (String, Vec<Heading>) {
        self.state.hidden = false;
        self.state.in_stylesheet = false;
        self.state.in_table = false;
        self.end_paragraph();
        self.outline.finish()
    }
}

/// A byte of the Windows-1252 code page, which RTF writers use by default (`\ansicpg1252`).
fn windows_1252(byte: u8) -> char {
    const HIGH: [char; 32] = [
        '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž',
        '\u{8f}', '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}',
        'ž', 'Ÿ',
    ];
    match byte {
        0x80..=0x9F => HIGH[usize::from(byte - 0x80)],
        _ => char::from(byte),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_escapes_headings_and_tables_are_read_and_furniture_left_out() {
        let rtf = br"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0\fswiss Calibri;}}
{\colortbl ;\red0\green0\blue255;}
{\stylesheet{\s0 Normal;}{\s1\sbasedon0\snext0 heading 1;}{\s2\outlinelevel1 heading 2;}}
{\*\generator Riched20 10.0;}\viewkind4\uc1
\pard\s1 Harbour committee\par
\pard Minutes of the caf\'e9 meeting \endash  price \u8364? 4.\line Next line.\par
{\pict\wmetafile8 0102030405}
\pard\intbl Item\cell Cost\cell\row
\pard\intbl Crane\cell 9\cell\row
\pard\outlinelevel1 Decisions\par
\pard The {\b crane} stays.\par}";
        let (text, headings) = to_text(rtf).unwrap();
        assert_eq!(
            text,
            "Harbour committee\n\nMinutes of the café meeting – price € 4.\nNext line.\n\n\
             Item | Cost\nItem: Crane; Cost: 9\n\nDecisions\n\nThe crane stays."
        );
        let titles: Vec<(u8, &str)> = headings
            .iter()
            .map(|h| (h.level, h.title.as_str()))
            .collect();
        assert_eq!(titles, [(1, "Harbour committee"), (2, "Decisions")]);
    }

    #[test]
    fn a_file_that_is_not_rtf_is_corrupt() {
        assert!(matches!(
            to_text(b"plain words"),
            Err(LoadError::Corrupt { kind: "RTF", .. })
        ));
    }
}
