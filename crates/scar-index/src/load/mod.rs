//! Reading one file into text: the size limit, format detection, UTF-8 decoding, and one module
//! per format that extracts the text (where it is not plain already) and finds the headings
//! which give chunks their context. `outline` lays out the text of the formats built from
//! markup (office files, e-books, mail), `zipped` reads the zip containers of most of them.
//!
//! Every way a file can be unusable is a [`LoadError`] whose message tells a person why it was
//! skipped; the error leaves out the path, which the caller puts in front.

mod docx;
mod eml;
mod epub;
mod html;
mod language;
mod markdown;
mod ocr;
mod odt;
mod outline;
mod pdf;
mod pptx;
mod rtf;
mod sheet;
#[cfg(test)]
pub(crate) mod test_pdf;
mod text;
mod xls;
mod zipped;

pub use language::{detect_language, language_name};

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

const MIB: u64 = 1024 * 1024;
/// Default for [`LoadOptions::max_file_bytes`]: 50 MiB.
const DEFAULT_MAX_FILE_BYTES: u64 = 50 * MIB;
/// Default for [`LoadOptions::max_read_time`]: long enough to OCR a scanned book on a laptop.
const DEFAULT_MAX_READ_TIME: std::time::Duration = std::time::Duration::from_mins(10);
/// Default for [`LoadOptions::max_read_memory`]: 4 GiB.
const DEFAULT_MAX_READ_MEMORY: u64 = 4096 * MIB;
/// How much of a file is checked for NUL bytes before the rest is read.
const SNIFF_BYTES: u64 = 8 * 1024;
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
    /// A Word document (`.docx`).
    Word,
    /// An OpenDocument text (`.odt`).
    OpenDocumentText,
    /// A PowerPoint deck (`.pptx`).
    PowerPoint,
    /// A spreadsheet: Excel (`.xlsx`, `.xlsm`, `.xls`) or OpenDocument (`.ods`).
    Spreadsheet,
    /// Delimited text (`.csv`, `.tsv`).
    Csv,
    /// An e-book (`.epub`).
    Epub,
    /// Rich Text Format (`.rtf`).
    Rtf,
    /// An e-mail message (`.eml`).
    Email,
}

impl Format {
    /// The format a file's extension names, if it names one.
    #[must_use]
    pub fn named(path: &Path) -> Option<Self> {
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)?;
        Some(match extension.as_str() {
            "txt" | "text" => Self::Text,
            "md" | "markdown" => Self::Markdown,
            "html" | "htm" | "xhtml" => Self::Html,
            "pdf" => Self::Pdf,
            "docx" | "docm" => Self::Word,
            "odt" => Self::OpenDocumentText,
            "pptx" | "pptm" => Self::PowerPoint,
            "xlsx" | "xlsm" | "xls" | "ods" => Self::Spreadsheet,
            "csv" | "tsv" => Self::Csv,
            "epub" => Self::Epub,
            "rtf" => Self::Rtf,
            "eml" => Self::Email,
            _ => return None,
        })
    }

    /// The format the extension names; files with other extensions are sniffed by `head`.
    fn detect(path: &Path, head: &[u8]) -> Self {
        Self::named(path).unwrap_or(if head.starts_with(b"%PDF-") {
            Self::Pdf
        } else {
            Self::Text
        })
    }

    /// Formats whose files are binary containers, never checked for NUL bytes.
    fn is_binary(self) -> bool {
        matches!(
            self,
            Self::Pdf
                | Self::Word
                | Self::OpenDocumentText
                | Self::PowerPoint
                | Self::Spreadsheet
                | Self::Epub
        )
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
    /// For a document of pages (PDF), the byte offset in `text` where each page starts, in page
    /// order; empty for the other formats.
    pub pages: Vec<usize>,
    /// Files carried inside this one (a mail's attachments) in formats the loader reads, each
    /// read as a document of its own.
    pub attachments: Vec<Attachment>,
    /// Problems that did not stop loading, such as replaced invalid UTF-8.
    pub warnings: Vec<String>,
    /// blake3 of the file's bytes as lowercase hex, to notice when it changes.
    pub hash: String,
}

impl LoadedDocument {
    /// The document itself (`attachment` `None`), or the attachment of that name it carries.
    #[must_use]
    pub fn into_part(self, attachment: Option<&str>) -> Option<Self> {
        let Some(name) = attachment else {
            return Some(self);
        };
        self.attachments
            .into_iter()
            .find(|carried| carried.name == name)
            .map(|carried| carried.document)
    }
}

/// A file carried inside another, read as a document of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Its file name inside the file that carries it.
    pub name: String,
    /// What it holds.
    pub document: LoadedDocument,
}

/// Settings for [`load_document`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Files larger than this are skipped without being read. Default: 50 MiB.
    pub max_file_bytes: u64,
    /// An indexing run skips a file whose reading and cutting take longer than this, and
    /// later runs skip it until it changes. Default: 10 minutes.
    pub max_read_time: std::time::Duration,
    /// An indexing run stops when the process grows by more than this many bytes while
    /// reading one file, and later runs skip that file until it changes. Default: 4 GiB.
    pub max_read_memory: u64,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_read_time: DEFAULT_MAX_READ_TIME,
            max_read_memory: DEFAULT_MAX_READ_MEMORY,
        }
    }
}

/// Why a file was skipped. The message is for a person; the caller adds the path.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be opened or read.
    #[error("cannot read")]
    Io(#[from] io::Error),
    /// The file holds nothing but whitespace, or no visible text.
    #[error("empty file")]
    Empty,
    /// The file is over [`LoadOptions::max_file_bytes`].
    #[error(
        "larger than the {} limit ({size} bytes); raise --max-file-mib to index it",
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
    /// The PDF's compressed streams inflate past [`LoadOptions::max_file_bytes`].
    #[error(
        "PDF streams inflate past the {} limit; raise --max-file-mib to index it",
        human_size(*.limit)
    )]
    PdfInflatesTooLarge {
        /// The limit they exceed, in bytes.
        limit: u64,
    },
    /// The PDF has pages but no text layer, and OCR found no text on them.
    #[error("PDF has no text layer, and OCR found no text on its pages")]
    PdfNoText,
    /// The PDF has pages but no text layer, and the OCR programs are not installed.
    #[error(
        "PDF has no text layer (scanned images?); install tesseract-ocr and poppler-utils to \
         read it by OCR"
    )]
    PdfNeedsOcr,
    /// The PDF could not be parsed.
    #[error("corrupt PDF")]
    CorruptPdf(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The parts of a zipped file (an office document, an e-book) inflate past
    /// [`LoadOptions::max_file_bytes`].
    #[error(
        "its compressed parts inflate past the {} limit; raise --max-file-mib to index it",
        human_size(*.limit)
    )]
    InflatesTooLarge {
        /// The limit they exceed, in bytes.
        limit: u64,
    },
    /// The text laid out from the file's cells runs past [`LoadOptions::max_file_bytes`]: a
    /// value shared or repeated by many cells, counted before it is copied.
    #[error(
        "its cells hold more than the {} limit of text (values shared or repeated across \
         cells); raise --max-file-mib to index it",
        human_size(*.limit)
    )]
    CellsTooLarge {
        /// The limit they exceed, in bytes.
        limit: u64,
    },
    /// An `.xls` sheet declares or spans a rectangle of cells far larger than the cells it
    /// holds: its reader lays out every cell of it, past [`LoadOptions::max_file_bytes`].
    #[error(
        "a sheet declares or spans {cells} cells, which its reader lays out one by one, past \
         the {} limit; raise --max-file-mib to index it",
        human_size(*.limit)
    )]
    LayoutTooLarge {
        /// Cells of the largest rectangle the sheet declares or spans.
        cells: u64,
        /// The limit it exceeds, in bytes.
        limit: u64,
    },
    /// The file is damaged, or not what its extension says.
    #[error("corrupt {kind} file")]
    Corrupt {
        /// The format it was read as, as a person names it (`Word`, `EPUB`).
        kind: &'static str,
        /// What the reader found wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A format that is known but not read, with what to save it as instead.
    #[error("{0}")]
    Unsupported(&'static str),
}

/// The blake3 hash of `bytes` as lowercase hex: equal hashes mean unchanged files.
#[must_use]
fn content_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Reads the file at `path` into text, with its headings and content hash.
///
/// The size limit is checked against the file's metadata before anything is read, and text
/// files are sniffed for NUL bytes before the rest of the file is read. A PDF's compressed
/// streams must inflate within the same limit, which bounds the memory any one file takes.
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
    sniff(path, &bytes)?;
    reader.read_to_end(&mut bytes)?;
    load_bytes(path, &bytes, options)
}

/// Reads a file's content, named `path` (its extension decides the format), into text as
/// [`load_document`] reads the file.
pub fn load_bytes(
    path: &Path,
    bytes: &[u8],
    options: &LoadOptions,
) -> Result<LoadedDocument, LoadError> {
    load_carried(path, bytes, options, 0)
}

/// [`load_bytes`] for a file carried `depth` mails deep (0: the file itself).
fn load_carried(
    path: &Path,
    bytes: &[u8],
    options: &LoadOptions,
    depth: usize,
) -> Result<LoadedDocument, LoadError> {
    let limit = options.max_file_bytes;
    if bytes.len() as u64 > limit {
        return Err(LoadError::TooLarge {
            size: bytes.len() as u64,
            limit,
        });
    }
    let format = sniff(path, bytes)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(LoadError::Empty);
    }

    let mut warnings = Vec::new();
    let mut pages = Vec::new();
    let mut attachments = Vec::new();
    let (text, headings) = match format {
        Format::Text => {
            let text = decode_utf8(bytes, &mut warnings)?;
            let headings = text::headings(&text);
            (text, headings)
        }
        Format::Markdown => {
            let text = decode_utf8(bytes, &mut warnings)?;
            let headings = markdown::headings(&text);
            (text, headings)
        }
        Format::Html => html::to_text(&decode_utf8(bytes, &mut warnings)?),
        Format::Pdf => {
            let text;
            (text, pages) = pdf::text(bytes, limit, &mut warnings)?;
            let headings = text::headings(&text);
            (text, headings)
        }
        Format::Word => docx::to_text(bytes, limit)?,
        Format::OpenDocumentText => odt::to_text(bytes, limit)?,
        Format::PowerPoint => pptx::to_text(bytes, limit)?,
        Format::Spreadsheet => sheet::workbook_text(bytes, limit)?,
        Format::Csv => {
            let tab_separated = path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("tsv"));
            sheet::delimited_text(bytes, tab_separated, &mut warnings)?
        }
        Format::Epub => epub::to_text(bytes, limit)?,
        Format::Rtf => rtf::to_text(bytes)?,
        Format::Email => {
            let (text, headings);
            (text, headings, attachments) = eml::to_text(bytes, options, depth, &mut warnings)?;
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
        pages,
        attachments,
        warnings,
        hash: content_hash(bytes),
    })
}

/// The format of a file named `path` that starts with `head`, unless `head` shows it is not text.
fn sniff(path: &Path, head: &[u8]) -> Result<Format, LoadError> {
    if let Some(reason) = unsupported(path) {
        return Err(LoadError::Unsupported(reason));
    }
    let format = Format::detect(path, head);
    if !format.is_binary() {
        if head.starts_with(b"\xFF\xFE") || head.starts_with(b"\xFE\xFF") {
            return Err(LoadError::Utf16);
        }
        let sniffed = &head[..head.len().min(SNIFF_BYTES as usize)];
        if sniffed.contains(&0) {
            return Err(LoadError::Binary);
        }
    }
    Ok(format)
}

/// Why a file in an older office format is not read, and what to save it as.
fn unsupported(path: &Path) -> Option<&'static str> {
    let extension = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match extension.as_str() {
        "doc" => "Word 97-2003 documents are not read; save it as .docx to index it",
        "ppt" => "PowerPoint 97-2003 decks are not read; save it as .pptx to index it",
        _ => return None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::time::{Duration, Instant};
    use tempfile::TempDir;

    fn write(dir: &TempDir, name: &str, bytes: impl AsRef<[u8]>) -> std::path::PathBuf {
        let path = dir.path().join(name);
        fs::write(&path, bytes).unwrap();
        path
    }

    /// Loads `bytes` as a file named `name`, checking that reading them from memory agrees.
    pub(super) fn load(name: &str, bytes: impl AsRef<[u8]>) -> Result<LoadedDocument, LoadError> {
        let dir = TempDir::new().unwrap();
        let options = LoadOptions::default();
        let from_file = load_document(&write(&dir, name, &bytes), &options);
        let from_memory = load_bytes(Path::new(name), bytes.as_ref(), &options);
        assert_eq!(format!("{from_file:?}"), format!("{from_memory:?}"));
        from_file
    }

    pub(super) fn titles(headings: &[Heading]) -> Vec<(u8, &str)> {
        headings
            .iter()
            .map(|h| (h.level, h.title.as_str()))
            .collect()
    }

    /// Checks that every heading's offset is the start of a line holding its first word.
    pub(super) fn assert_offsets_match(document: &LoadedDocument) {
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
            "larger than the 50 MiB limit (1073741824 bytes); raise --max-file-mib to index it"
        );

        let small = LoadOptions {
            max_file_bytes: 4,
            ..LoadOptions::default()
        };
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
        assert!(
            scar_core::ErrorChain(&error)
                .to_string()
                .starts_with("cannot read: ")
        );
        let missing = load_document(&dir.path().join("gone.txt"), &LoadOptions::default());
        assert!(matches!(missing, Err(LoadError::Io(_))));
    }
}
