//! Reading one file into text: format detection, UTF-8 decoding, HTML and PDF text extraction,
//! and the headings that give chunks their context.
//!
//! Every way a file can be unusable is a [`LoadError`] whose message tells a person why it was
//! skipped; the error leaves out the path, which the caller puts in front.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read};
use std::panic::{self, UnwindSafe};
use std::path::Path;
use std::sync::Once;

const MIB: u64 = 1024 * 1024;
/// Default for [`LoadOptions::max_file_bytes`]: 50 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 50 * MIB;
/// How much of a file is checked for NUL bytes before the rest is read.
const SNIFF_BYTES: u64 = 8 * 1024;
/// Longest line, in characters, that plain-text heading detection accepts.
const MAX_HEADING_CHARS: usize = 100;
/// The name on the line after a bare `Article 89` may be longer: GDPR's run to 163 characters.
const MAX_NAME_CHARS: usize = 200;
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The kind of document a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Plain text, also any file with an unknown extension that reads as UTF-8 text.
    Text,
    /// Markdown, kept as written.
    Markdown,
    /// HTML, turned into plain text.
    Html,
    /// PDF, read through its text layer.
    Pdf,
}

impl Format {
    /// The format the extension names; files with other extensions are sniffed by `head`.
    fn detect(path: &Path, head: &[u8]) -> Self {
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match extension.as_deref() {
            Some("txt" | "text") => Self::Text,
            Some("md" | "markdown") => Self::Markdown,
            Some("html" | "htm" | "xhtml") => Self::Html,
            Some("pdf") => Self::Pdf,
            _ if head.starts_with(b"%PDF-") => Self::Pdf,
            _ => Self::Text,
        }
    }
}

/// A section heading found in a document's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    /// Byte offset in [`LoadedDocument::text`] where the heading line starts.
    pub offset: usize,
    /// Nesting depth: 1 is the top level.
    pub level: u8,
    /// The heading as a person would quote it, e.g. `3.10. Event Processing`.
    pub title: String,
}

/// A file read into text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedDocument {
    /// The format the text came from.
    pub format: Format,
    /// The text to chunk and index; chunk byte ranges point into it.
    pub text: String,
    /// Headings in the order they appear in `text`.
    pub headings: Vec<Heading>,
    /// Problems that did not stop loading, such as replaced invalid UTF-8.
    pub warnings: Vec<String>,
    /// [`content_hash`] of the file's bytes, to notice when it changes.
    pub hash: String,
}

/// Settings for [`load_document`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Files larger than this are skipped without being read. Default: 50 MiB.
    pub max_file_bytes: u64,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
        }
    }
}

/// Why a file was skipped. The message is for a person; the caller adds the path.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be opened or read.
    #[error("cannot read: {0}")]
    Io(#[from] io::Error),
    /// The file holds nothing but whitespace, or no visible text.
    #[error("empty file")]
    Empty,
    /// The file is over [`LoadOptions::max_file_bytes`].
    #[error(
        "larger than the {} limit ({size} bytes); raise --max-file-size to index it",
        human_size(*.limit)
    )]
    TooLarge {
        /// Size of the file in bytes.
        size: u64,
        /// The limit it exceeds, in bytes.
        limit: u64,
    },
    /// The file looks like binary data rather than text.
    #[error("binary file (NUL bytes in the first 8 KiB)")]
    Binary,
    /// The file starts with a UTF-16 byte order mark.
    #[error("UTF-16 text is not supported; save it as UTF-8 to index it")]
    Utf16,
    /// Too much of the file is invalid UTF-8 to be text in that encoding.
    #[error("not UTF-8 text ({invalid} of {len} bytes are invalid); save it as UTF-8 to index it")]
    NotUtf8 {
        /// Bytes that are not part of a valid UTF-8 sequence.
        invalid: usize,
        /// Length of the file in bytes.
        len: usize,
    },
    /// The PDF has pages but no extractable text.
    #[error("PDF has no text layer (scanned images?)")]
    PdfNoText,
    /// The PDF could not be parsed.
    #[error("corrupt PDF: {0}")]
    CorruptPdf(String),
}

/// The blake3 hash of `bytes` as lowercase hex: equal hashes mean unchanged files.
#[must_use]
pub fn content_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Reads the file at `path` into text, with its headings and content hash.
///
/// The size limit is checked against the file's metadata before anything is read, and text
/// files are sniffed for NUL bytes before the rest of the file is read.
pub fn load_document(path: &Path, options: &LoadOptions) -> Result<LoadedDocument, LoadError> {
    let limit = options.max_file_bytes;
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    if size > limit {
        return Err(LoadError::TooLarge { size, limit });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // Reading one byte past the limit catches a file that grew since its metadata was read.
    let mut reader = file.take(limit.saturating_add(1));
    reader.by_ref().take(SNIFF_BYTES).read_to_end(&mut bytes)?;
    let format = Format::detect(path, &bytes);
    if format != Format::Pdf {
        if bytes.starts_with(b"\xFF\xFE") || bytes.starts_with(b"\xFE\xFF") {
            return Err(LoadError::Utf16);
        }
        if bytes.contains(&0) {
            return Err(LoadError::Binary);
        }
    }
    reader.read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(LoadError::TooLarge {
            size: bytes.len() as u64,
            limit,
        });
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(LoadError::Empty);
    }

    let mut warnings = Vec::new();
    let (text, headings) = match format {
        Format::Text => {
            let text = decode_utf8(&bytes, &mut warnings)?;
            let headings = text_headings(&text);
            (text, headings)
        }
        Format::Markdown => {
            let text = decode_utf8(&bytes, &mut warnings)?;
            let headings = markdown_headings(&text);
            (text, headings)
        }
        Format::Html => html_to_text(&decode_utf8(&bytes, &mut warnings)?),
        Format::Pdf => {
            let text = pdf_text(&bytes)?;
            if text.trim().is_empty() {
                return Err(LoadError::PdfNoText);
            }
            let headings = text_headings(&text);
            (text, headings)
        }
    };
    if text.trim().is_empty() {
        return Err(LoadError::Empty);
    }
    Ok(LoadedDocument {
        format,
        text,
        headings,
        warnings,
        hash: content_hash(&bytes),
    })
}

/// `50 MiB` for whole mebibytes, otherwise the exact byte count.
fn human_size(bytes: u64) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes}-byte")
    }
}

/// Decodes UTF-8 without a BOM, replacing rare invalid sequences (a warning says how many) but
/// refusing text where more than 1% of the bytes are invalid: that is another encoding.
fn decode_utf8(bytes: &[u8], warnings: &mut Vec<String>) -> Result<String, LoadError> {
    let bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
    let (invalid_bytes, invalid_sequences) = bytes
        .utf8_chunks()
        .map(|chunk| chunk.invalid().len())
        .filter(|&len| len > 0)
        .fold((0, 0), |(total, count), len| (total + len, count + 1));
    if invalid_bytes * 100 > bytes.len() {
        return Err(LoadError::NotUtf8 {
            invalid: invalid_bytes,
            len: bytes.len(),
        });
    }
    if invalid_sequences > 0 {
        warnings.push(format!(
            "{invalid_sequences} invalid UTF-8 sequence(s) replaced with U+FFFD"
        ));
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

/// Each line of `text` without its line ending, with the byte offset where it starts.
fn lines_with_offsets(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split_inclusive('\n').scan(0, |offset, line| {
        let start = *offset;
        *offset += line.len();
        Some((start, line.trim_end_matches(['\n', '\r'])))
    })
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

// --- Plain text ---

/// Numbered section headings in plain text, e.g. `3.10.  Event Processing`, `Article 17` or
/// `PART II`. Precision matters more than recall: a heading must stand as its own paragraph,
/// start at the left margin, and read like a title rather than a sentence.
fn text_headings(text: &str) -> Vec<Heading> {
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

// --- Markdown ---

/// ATX (`## Title`) and single-line setext (`Title` over `===`) headings outside fenced code.
fn markdown_headings(text: &str) -> Vec<Heading> {
    let mut headings = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    let mut previous_blank = true;
    // A line that starts a paragraph, which a setext underline on the next line makes a heading.
    let mut paragraph_start: Option<(usize, &str)> = None;
    for (offset, line) in lines_with_offsets(text) {
        let trimmed = line.trim();
        let indent = line.len() - line.trim_start().len();
        let setext_title = paragraph_start.take();
        if let Some((marker, length)) = fence {
            if fence_marker(trimmed).is_some_and(|(m, n)| m == marker && n >= length)
                && trimmed.trim_start_matches(marker).is_empty()
            {
                fence = None;
            }
        } else if indent > 3 {
            // Indented code or a paragraph's continuation: never a heading.
        } else if let Some(opening) = fence_marker(trimmed) {
            fence = Some(opening);
        } else if let Some((level, title)) = atx_heading(trimmed) {
            headings.push(Heading {
                offset,
                level,
                title: title.to_owned(),
            });
        } else if let Some(level) = setext_level(trimmed) {
            if let Some((offset, title)) = setext_title {
                headings.push(Heading {
                    offset,
                    level,
                    title: title.to_owned(),
                });
            }
        } else if previous_blank && !trimmed.is_empty() {
            paragraph_start = Some((offset, trimmed));
        }
        previous_blank = trimmed.is_empty();
    }
    headings
}

/// A code fence: three or more backticks or tildes, giving the character and count.
fn fence_marker(trimmed: &str) -> Option<(char, usize)> {
    let marker = trimmed.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let length = trimmed.len() - trimmed.trim_start_matches(marker).len();
    (length >= 3).then_some((marker, length))
}

fn atx_heading(trimmed: &str) -> Option<(u8, &str)> {
    let rest = trimmed.trim_start_matches('#');
    let level = trimmed.len() - rest.len();
    if !(1..=6).contains(&level) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let title = rest.trim();
    // A closing run of `#` is decoration only when a space separates it, as in `# C#` it is not.
    let without_closing = title.trim_end_matches('#');
    let title = if without_closing.is_empty() || without_closing.ends_with([' ', '\t']) {
        without_closing.trim_end()
    } else {
        title
    };
    (!title.is_empty()).then_some((level as u8, title))
}

fn setext_level(trimmed: &str) -> Option<u8> {
    match trimmed.chars().next()? {
        '=' if trimmed.bytes().all(|b| b == b'=') => Some(1),
        '-' if trimmed.bytes().all(|b| b == b'-') => Some(2),
        _ => None,
    }
}

// --- HTML ---

/// Turns HTML into readable text with a single loop over the markup (no recursion, so any depth
/// of nesting is safe). Hidden elements and comments are dropped, block elements become line
/// breaks, whitespace collapses outside `<pre>`, and `<h1>`–`<h6>` become headings.
///
/// `<head>` needs no special case: its only text-bearing children are `<title>`, which is kept as
/// the first paragraph, and `<script>`/`<style>`, which are hidden.
fn html_to_text(html: &str) -> (String, Vec<Heading>) {
    // ASCII lowercasing keeps byte offsets, so positions found in `lower` index `html` too.
    let lower = html.to_ascii_lowercase();
    let mut out = TextWriter::default();
    let mut pos = 0;
    while let Some(found) = html[pos..].find('<') {
        let start = pos + found;
        out.push_text(&html[pos..start]);
        pos = out.markup(html, &lower, start);
    }
    out.push_text(&html[pos..]);
    (out.text, out.headings)
}

/// Elements whose content is never shown as text.
const HIDDEN_ELEMENTS: &[&str] = &["script", "style", "noscript", "template"];

/// Accumulates visible text, deferring whitespace and line breaks until the next visible
/// character so that runs of them collapse and none trail at the end.
#[derive(Default)]
struct TextWriter {
    text: String,
    headings: Vec<Heading>,
    pending_space: bool,
    pending_newlines: usize,
    preformatted_depth: usize,
    /// The open `<hN>`'s level and where its text starts, once it has some.
    open_heading: Option<(u8, Option<usize>)>,
}

impl TextWriter {
    /// Handles the markup that starts at `html[start] == '<'`; returns where text resumes.
    fn markup(&mut self, html: &str, lower: &str, start: usize) -> usize {
        let after = start + 1;
        if lower[after..].starts_with("!--") {
            return find_after(lower, after, "-->");
        }
        if lower[after..].starts_with(['!', '?']) {
            return find_after(lower, after, ">");
        }
        let closing = lower[after..].starts_with('/');
        let name_start = after + usize::from(closing);
        if !lower[name_start..].starts_with(|c: char| c.is_ascii_alphabetic()) {
            self.push_char('<');
            return after;
        }
        let name_len = lower[name_start..]
            .bytes()
            .take_while(u8::is_ascii_alphanumeric)
            .count();
        let name = &lower[name_start..name_start + name_len];
        let end = tag_end(html, name_start + name_len);
        if closing {
            self.end_tag(name);
        } else if HIDDEN_ELEMENTS.contains(&name) {
            return find_after(lower, find_after(lower, end, &format!("</{name}")), ">");
        } else {
            self.start_tag(name);
        }
        end
    }

    fn start_tag(&mut self, name: &str) {
        if let Some(level) = heading_level(name) {
            self.finish_heading();
            self.open_heading = Some((level, None));
        }
        if name == "pre" {
            self.preformatted_depth += 1;
        }
        self.separate(name);
    }

    fn end_tag(&mut self, name: &str) {
        if heading_level(name).is_some() {
            self.finish_heading();
        }
        if name == "pre" {
            self.preformatted_depth = self.preformatted_depth.saturating_sub(1);
        }
        self.separate(name);
    }

    /// The break an element puts between its content and what surrounds it.
    fn separate(&mut self, name: &str) {
        match name {
            "br" | "li" | "tr" | "dt" | "dd" | "option" | "caption" => self.break_lines(1),
            "td" | "th" => self.pending_space = true,
            "p" | "div" | "title" | "section" | "article" | "header" | "footer" | "nav"
            | "main" | "aside" | "blockquote" | "pre" | "table" | "ul" | "ol" | "dl" | "hr"
            | "figure" | "figcaption" | "form" | "fieldset" | "details" | "summary" | "address"
            | "body" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => self.break_lines(2),
            _ => {}
        }
    }

    fn break_lines(&mut self, count: usize) {
        self.pending_newlines = self.pending_newlines.max(count);
    }

    fn finish_heading(&mut self) {
        if let Some((level, Some(offset))) = self.open_heading.take() {
            let title = collapse_whitespace(&self.text[offset..]);
            self.headings.push(Heading {
                offset,
                level,
                title,
            });
        }
    }

    /// Pushes text between tags, decoding character references.
    fn push_text(&mut self, mut text: &str) {
        while let Some(amp) = text.find('&') {
            text[..amp].chars().for_each(|c| self.push_char(c));
            text = &text[amp + 1..];
            match decode_entity(text) {
                Some((c, len)) => {
                    self.push_char(c);
                    text = &text[len..];
                }
                None => self.push_char('&'),
            }
        }
        text.chars().for_each(|c| self.push_char(c));
    }

    fn push_char(&mut self, c: char) {
        if c.is_whitespace() && self.preformatted_depth == 0 {
            self.pending_space = true;
            return;
        }
        if !self.text.is_empty() {
            if self.pending_newlines > 0 {
                self.text
                    .extend(std::iter::repeat_n('\n', self.pending_newlines));
            } else if self.pending_space {
                self.text.push(' ');
            }
        }
        self.pending_newlines = 0;
        self.pending_space = false;
        if let Some((_, start @ None)) = &mut self.open_heading {
            *start = Some(self.text.len());
        }
        self.text.push(c);
    }
}

fn heading_level(name: &str) -> Option<u8> {
    match name.as_bytes() {
        [b'h', digit @ b'1'..=b'6'] => Some(digit - b'0'),
        _ => None,
    }
}

/// The position just past the first `needle` at or after `from`, or the end of `haystack`.
fn find_after(haystack: &str, from: usize, needle: &str) -> usize {
    haystack[from..]
        .find(needle)
        .map_or(haystack.len(), |i| from + i + needle.len())
}

/// The position just past the `>` that closes a tag, skipping `>` inside quoted attributes.
fn tag_end(html: &str, from: usize) -> usize {
    let mut quote = None;
    for (i, byte) in html.bytes().enumerate().skip(from) {
        match (quote, byte) {
            (None, b'>') => return i + 1,
            (None, b'"' | b'\'') => quote = Some(byte),
            (Some(open), _) if open == byte => quote = None,
            _ => {}
        }
    }
    html.len()
}

/// Decodes the character reference at the start of `text` (just after its `&`), returning the
/// character and the length consumed, `;` included.
fn decode_entity(text: &str) -> Option<(char, usize)> {
    let end = text.bytes().take(32).position(|b| b == b';')?;
    let name = &text[..end];
    let c = if let Some(number) = name.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse().ok()?,
        };
        char::from_u32(code)
            .filter(|&c| c != '\0')
            .unwrap_or(char::REPLACEMENT_CHARACTER)
    } else {
        named_entity(name)?
    };
    Some((c, end + 1))
}

fn named_entity(name: &str) -> Option<char> {
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => '\u{a0}',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "sect" => '§',
        "para" => '¶',
        "deg" => '°',
        "times" => '×',
        "euro" => '€',
        "pound" => '£',
        "hellip" => '…',
        "ndash" => '–',
        "mdash" => '—',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "bull" => '•',
        "middot" => '·',
        _ => return None,
    })
}

// --- PDF ---

fn pdf_text(bytes: &[u8]) -> Result<String, LoadError> {
    match catch_panic_quietly(|| pdf_extract::extract_text_from_mem(bytes)) {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(error)) => Err(LoadError::CorruptPdf(error.to_string())),
        Err(panic) => Err(LoadError::CorruptPdf(format!(
            "the PDF reader failed ({panic})"
        ))),
    }
}

thread_local! {
    static SILENCE_PANICS: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, turning a panic into `Err(message)` without printing it. PDF parsers panic on
/// malformed files, and a corrupt file should be a skipped file, not a crash or a stack trace.
///
/// The panic hook is process-wide, so instead of swapping it around each call (which races
/// when files load on several threads), one wrapper is installed that stays quiet only on
/// threads inside this function and otherwise defers to the hook it replaced.
fn catch_panic_quietly<T>(f: impl FnOnce() -> T + UnwindSafe) -> Result<T, String> {
    static INSTALL_HOOK: Once = Once::new();
    INSTALL_HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !SILENCE_PANICS.get() {
                previous(info);
            }
        }));
    });
    SILENCE_PANICS.set(true);
    let result = panic::catch_unwind(f);
    SILENCE_PANICS.set(false);
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;
    use std::fs;
    use std::time::{Duration, Instant};
    use tempfile::TempDir;

    fn write(dir: &TempDir, name: &str, bytes: impl AsRef<[u8]>) -> std::path::PathBuf {
        let path = dir.path().join(name);
        fs::write(&path, bytes).unwrap();
        path
    }

    fn load(name: &str, bytes: impl AsRef<[u8]>) -> Result<LoadedDocument, LoadError> {
        let dir = TempDir::new().unwrap();
        load_document(&write(&dir, name, bytes), &LoadOptions::default())
    }

    fn titles(headings: &[Heading]) -> Vec<(u8, &str)> {
        headings
            .iter()
            .map(|h| (h.level, h.title.as_str()))
            .collect()
    }

    /// Checks that every heading's offset is the start of a line holding its first word.
    fn assert_offsets_match(document: &LoadedDocument) {
        for heading in &document.headings {
            let (before, after) = document.text.split_at(heading.offset);
            let line = after.lines().next().unwrap();
            let first_word = heading.title.split_whitespace().next().unwrap();
            assert!(
                line.contains(first_word),
                "{heading:?} is not on line {line:?}"
            );
            assert!(before.is_empty() || before.ends_with('\n'));
        }
    }

    /// A one-page PDF whose page draws `content` with Helvetica, with a correct xref table.
    fn pdf_with_page_content(content: &str) -> Vec<u8> {
        let objects = [
            "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
             /Resources << /Font << /F1 5 0 R >> >> >>"
                .to_owned(),
            format!(
                "<< /Length {} >>\nstream\n{content}\nendstream",
                content.len()
            ),
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
        ];
        let mut pdf = String::from("%PDF-1.4\n");
        let mut offsets = Vec::new();
        for (number, body) in (1..).zip(&objects) {
            offsets.push(pdf.len());
            writeln!(pdf, "{number} 0 obj\n{body}\nendobj").unwrap();
        }
        let xref_offset = pdf.len();
        let count = objects.len() + 1;
        writeln!(pdf, "xref\n0 {count}\n0000000000 65535 f ").unwrap();
        for offset in offsets {
            writeln!(pdf, "{offset:010} 00000 n ").unwrap();
        }
        writeln!(
            pdf,
            "trailer\n<< /Size {count} /Root 1 0 R >>\nstartxref\n{xref_offset}\n%%EOF"
        )
        .unwrap();
        pdf.into_bytes()
    }

    #[test]
    fn plain_text_is_kept_exactly_and_hashed() {
        let text = "line one\r\nline two\n\n  indented\ttab\n";
        let document = load("notes.txt", text).unwrap();
        assert_eq!(document.format, Format::Text);
        assert_eq!(document.text, text);
        assert_eq!(document.hash, content_hash(text.as_bytes()));
        assert!(document.warnings.is_empty());
    }

    #[test]
    fn utf8_bom_is_stripped_but_hash_covers_the_raw_bytes() {
        let bytes = b"\xEF\xBB\xBFhello";
        let document = load("bom.txt", bytes).unwrap();
        assert_eq!(document.text, "hello");
        assert_eq!(document.hash, content_hash(bytes));
    }

    #[test]
    fn empty_and_whitespace_only_files_are_empty() {
        assert!(matches!(load("empty.txt", ""), Err(LoadError::Empty)));
        assert!(matches!(
            load("blank.md", " \n\t\r\n "),
            Err(LoadError::Empty)
        ));
        assert!(matches!(
            load("blank.html", "<html><p> &nbsp; </p></html>"),
            Err(LoadError::Empty)
        ));
        assert_eq!(load("empty.txt", "").unwrap_err().to_string(), "empty file");
    }

    #[test]
    fn rare_invalid_utf8_is_replaced_with_a_warning() {
        let mut bytes = "abc ".repeat(100).into_bytes();
        bytes[10] = 0xFF;
        bytes[200] = 0xC3; // a lead byte without its continuation
        let document = load("latin.txt", &bytes).unwrap();
        assert_eq!(document.text.matches('\u{FFFD}').count(), 2);
        assert_eq!(
            document.warnings,
            ["2 invalid UTF-8 sequence(s) replaced with U+FFFD"]
        );
    }

    #[test]
    fn mostly_invalid_utf8_is_refused() {
        let latin1: Vec<u8> = b"caf\xE9 cr\xE8me br\xFBl\xE9e".to_vec();
        let error = load("latin1.txt", &latin1).unwrap_err();
        assert!(
            matches!(
                error,
                LoadError::NotUtf8 {
                    invalid: 4,
                    len: 17
                }
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains("save it as UTF-8"));
    }

    #[test]
    fn binary_and_utf16_files_are_refused_whatever_their_extension() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";
        assert!(matches!(load("image.png", png), Err(LoadError::Binary)));
        assert!(matches!(load("disguised.txt", png), Err(LoadError::Binary)));
        assert!(matches!(load("no_extension", png), Err(LoadError::Binary)));
        assert!(matches!(
            load("windows.txt", b"\xFF\xFEh\0i\0"),
            Err(LoadError::Utf16)
        ));
        assert_eq!(
            LoadError::Binary.to_string(),
            "binary file (NUL bytes in the first 8 KiB)"
        );
    }

    #[test]
    fn unknown_extensions_are_sniffed_as_text() {
        let document = load("Makefile", "all:\n\tcargo build\n").unwrap();
        assert_eq!(document.format, Format::Text);
        assert_eq!(document.text, "all:\n\tcargo build\n");
    }

    #[test]
    fn size_limit_is_checked_from_metadata_before_reading() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("sparse.txt");
        // A sparse file: its metadata says 1 GiB though nothing was written, so reading it
        // would take seconds and a GiB of memory.
        fs::File::create(&path).unwrap().set_len(1 << 30).unwrap();
        let started = Instant::now();
        let error = load_document(&path, &LoadOptions::default()).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(matches!(
            error,
            LoadError::TooLarge {
                size: 1_073_741_824,
                limit: DEFAULT_MAX_FILE_BYTES
            }
        ));
        assert_eq!(
            error.to_string(),
            "larger than the 50 MiB limit (1073741824 bytes); raise --max-file-size to index it"
        );

        let small = LoadOptions { max_file_bytes: 4 };
        let error = load_document(&write(&dir, "five.txt", "12345"), &small).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("larger than the 4-byte limit (5 bytes)")
        );
        assert!(load_document(&write(&dir, "four.txt", "1234"), &small).is_ok());
    }

    #[test]
    fn a_folder_or_missing_file_cannot_be_read() {
        // Root can read chmod-000 files, so a folder stands in for an unreadable file.
        let dir = TempDir::new().unwrap();
        let error = load_document(dir.path(), &LoadOptions::default()).unwrap_err();
        assert!(matches!(error, LoadError::Io(_)));
        assert!(error.to_string().starts_with("cannot read: "));
        let missing = load_document(&dir.path().join("gone.txt"), &LoadOptions::default());
        assert!(matches!(missing, Err(LoadError::Io(_))));
    }

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

    #[test]
    fn markdown_headings_skip_fenced_code() {
        let text = "\
# Title

Intro text.

```sh
# not a heading
~~~
## still code
```

## Usage ##

Setext Heading
--------------

~~~~
# code
~~~~

#hashtag is not a heading
### C#
";
        let document = load("README.md", text).unwrap();
        assert_eq!(document.format, Format::Markdown);
        assert_eq!(document.text, text);
        assert_eq!(
            titles(&document.headings),
            [(1, "Title"), (2, "Usage"), (2, "Setext Heading"), (3, "C#")]
        );
        assert_offsets_match(&document);
    }

    #[test]
    fn html_becomes_readable_text_with_headings() {
        let html = "<!DOCTYPE html><html><head><title>Guide</title>\
            <style>body { color: red }</style><script>if (a < b) { x = '</p>' }</script></head>\
            <body><!-- a comment <p>hidden</p> -->\
            <h1 class=\"x>y\">Caf&bogus;s &amp; Bars</h1>\
            <p>Fish   &lt;&gt; chips&nbsp;&#39;n&#x27; &quot;peas&quot;\n and more</p>\
            <ul><li>one</li><li>two<br>three</li></ul>\
            <H2>Prices &#8364;</H2><table><tr><td>a</td><td>b</td></tr></table>\
            <pre>keep   this\n  layout</pre>1 < 2</body></html>";
        let document = load("guide.html", html).unwrap();
        assert_eq!(document.format, Format::Html);
        assert_eq!(
            document.text,
            "Guide\n\nCaf&bogus;s & Bars\n\nFish <> chips 'n' \"peas\" and more\n\n\
             one\ntwo\nthree\n\nPrices €\n\na b\n\nkeep   this\n  layout\n\n1 < 2"
        );
        assert_eq!(
            titles(&document.headings),
            [(1, "Caf&bogus;s & Bars"), (2, "Prices €")]
        );
        assert_offsets_match(&document);
    }

    #[test]
    fn deeply_nested_html_loads_quickly() {
        let depth = 100_000;
        let html = format!(
            "{}deep text{}",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        );
        let started = Instant::now();
        let document = load("deep.htm", html).unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(document.text, "deep text");
    }

    #[test]
    fn pdf_text_layer_is_extracted() {
        let pdf = pdf_with_page_content("BT /F1 12 Tf 72 720 Td (Hello PDF) Tj ET");
        let document = load("hello.pdf", &pdf).unwrap();
        assert_eq!(document.format, Format::Pdf);
        assert_eq!(document.text.trim(), "Hello PDF");
        assert_eq!(document.hash, content_hash(&pdf));
        // Sniffed by its header when the extension does not say.
        assert_eq!(load("hello", &pdf).unwrap().format, Format::Pdf);
    }

    #[test]
    fn pdf_without_text_is_refused() {
        let error = load("scan.pdf", pdf_with_page_content("")).unwrap_err();
        assert!(matches!(error, LoadError::PdfNoText), "{error:?}");
        assert_eq!(error.to_string(), "PDF has no text layer (scanned images?)");
    }

    #[test]
    fn corrupt_pdf_is_refused() {
        let garbage =
            b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R\n\xE2\xE3\xCF\xD3 garbage";
        let error = load("broken.pdf", garbage).unwrap_err();
        assert!(matches!(error, LoadError::CorruptPdf(_)), "{error:?}");
        assert!(error.to_string().starts_with("corrupt PDF: "));
    }

    #[test]
    fn panics_become_errors() {
        let result = catch_panic_quietly(|| -> u8 { panic!("bad xref") });
        assert_eq!(result, Err("bad xref".to_owned()));
        assert_eq!(catch_panic_quietly(|| 7), Ok(7));
        assert!(!SILENCE_PANICS.get());
    }
}
