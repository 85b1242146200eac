//! The on-disk format: the manifest, the catalog, the chunk records and the tantivy schema, and
//! how the manifest is read back.

use std::ops::Range;
use std::path::{Path, PathBuf};

use scar_core::SeamKind;
use serde::{Deserialize, Serialize};
use tantivy::schema::{FAST, Field, INDEXED, STORED, Schema, TEXT};

use crate::Analyzer;
use crate::chunk::ChunkerConfig;
use crate::error::io_error;
use crate::folder::IndexFile;
use crate::{IndexError, Result};

/// Bumped whenever the on-disk layout changes. 2: chunk records hold the kind of the seam after
/// the chunk; the text index's slot and ordinal are fast fields.
pub(crate) const FORMAT_VERSION: u32 = 2;

/// How embeddings are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum VectorEncoding {
    /// 4 bytes a dimension, memory-mapped as is.
    #[default]
    F32,
    /// 2 bytes a dimension on disk (half the size), widened to f32 when the index is opened.
    F16,
}

impl VectorEncoding {
    /// Bytes per dimension.
    pub(crate) fn bytes(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F16 => 2,
        }
    }
}

/// What an index was built with; fixed when it is created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// On-disk layout version.
    pub format_version: u32,
    /// The embedding model (its id, dimension, pooling, length limit, query prefix).
    pub model: scar_embed::ModelInfo,
    /// How documents were cut.
    pub chunker: ChunkerConfig,
    /// How vectors are stored.
    pub vectors: VectorEncoding,
    /// How text is cut into the words BM25 counts; indexes made before it was recorded cut
    /// letter runs.
    #[serde(default)]
    pub analyzer: Analyzer,
}

impl Manifest {
    /// The manifest of a new index, in this build's format.
    pub(crate) fn new(
        model: scar_embed::ModelInfo,
        chunker: ChunkerConfig,
        vectors: VectorEncoding,
    ) -> Self {
        Self {
            format_version: FORMAT_VERSION,
            model,
            chunker,
            vectors,
            analyzer: Analyzer::CURRENT,
        }
    }

    /// Bytes of one stored vector.
    pub(crate) fn row_bytes(&self) -> usize {
        self.model.dimension.saturating_mul(self.vectors.bytes())
    }
}

/// One indexed document, as the catalog records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentEntry {
    /// Stable id of this version of the document (never reused).
    pub slot: u32,
    /// Canonical path of the file, exactly as the file system spells it.
    #[serde(with = "stored_path")]
    pub path: PathBuf,
    /// For a document carried inside the file (a mail's attachment), its name there; the
    /// file's own text has none. A file's documents share its hash, size and time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<String>,
    /// blake3 of the file's bytes.
    pub hash: String,
    /// File size and modification time (ns since the epoch) when indexed: a cheap change check.
    pub size: u64,
    /// See `size`.
    pub modified_ns: u64,
    /// Its rows: `first_row .. first_row + chunk_count`.
    pub first_row: u32,
    /// Number of chunks.
    pub chunk_count: u32,
    /// For a document of pages (PDF), the byte offset in its text where each page starts;
    /// empty for the other formats, and in catalogs written before pages were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pages: Vec<u32>,
    /// Where it was found, when a link led there from outside the folder indexed (the path
    /// through the link): it leaves the index when that path goes, with its link or a folder
    /// above. `None` for a file inside its folder.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "optional_stored_path"
    )]
    pub reached_from: Option<PathBuf>,
    /// A checksum of its rows as they were written (the first 8 bytes of blake3 over each row's
    /// vector, record and text), so that a verify finds a flipped bit; `None` in catalogs
    /// written before checksums were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<u64>,
    /// The language its text is mostly written in (ISO 639-3: `eng`, `hin`, `jpn`), when it
    /// could be told; `None` in catalogs written before languages were told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}

/// How a document is named to a person: the file's name, and an attachment's name inside it
/// (`mail.eml › notes.md`).
#[must_use]
pub fn document_name(path: &Path, attachment: Option<&str>) -> String {
    let file = path
        .file_name()
        .unwrap_or(path.as_os_str())
        .to_string_lossy();
    match attachment {
        Some(attachment) => format!("{file} › {attachment}"),
        None => file.into_owned(),
    }
}

/// Paths in the catalog: a JSON string when they are UTF-8 (as every catalog has written them),
/// otherwise their raw bytes, so that a file name the file system allows always round-trips.
pub(crate) mod stored_path {
    use std::path::{Path, PathBuf};

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Text(String),
        Bytes(Vec<u8>),
    }

    pub(crate) fn serialize<S: Serializer>(path: &Path, serializer: S) -> Result<S::Ok, S::Error> {
        match path.to_str() {
            Some(text) => serializer.serialize_str(text),
            None => path.as_os_str().as_encoded_bytes().serialize(serializer),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<PathBuf, D::Error> {
        Ok(match Stored::deserialize(deserializer)? {
            Stored::Text(text) => PathBuf::from(text),
            Stored::Bytes(bytes) => from_bytes(bytes),
        })
    }

    #[cfg(unix)]
    fn from_bytes(bytes: Vec<u8>) -> PathBuf {
        use std::os::unix::ffi::OsStringExt;
        PathBuf::from(std::ffi::OsString::from_vec(bytes))
    }

    // Elsewhere paths that are not UTF-8 cannot be written as bytes and read back safely.
    #[cfg(not(unix))]
    fn from_bytes(bytes: Vec<u8>) -> PathBuf {
        PathBuf::from(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// [`stored_path`] for a path that may be absent.
pub(crate) mod optional_stored_path {
    use std::path::PathBuf;

    use serde::{Deserialize, Deserializer, Serializer};

    #[allow(clippy::ref_option)] // serde's signature for `with`
    pub(crate) fn serialize<S: Serializer>(
        path: &Option<PathBuf>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match path {
            Some(path) => super::stored_path::serialize(path, serializer),
            None => serializer.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<PathBuf>, D::Error> {
        #[derive(Deserialize)]
        struct Wrapped(#[serde(with = "super::stored_path")] PathBuf);
        Ok(Option::<Wrapped>::deserialize(deserializer)?.map(|Wrapped(path)| path))
    }
}

/// A file's size and modification time (ns since the epoch): the cheap check that it has not
/// changed since it was indexed.
#[must_use]
pub(crate) fn file_stamp(metadata: &std::fs::Metadata) -> (u64, u64) {
    let modified_ns = metadata
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    (metadata.len(), modified_ns)
}

impl DocumentEntry {
    /// True when a file with this metadata looks unchanged since it was indexed.
    #[must_use]
    pub fn is_current(&self, metadata: &std::fs::Metadata) -> bool {
        file_stamp(metadata) == (self.size, self.modified_ns)
    }

    /// The rows (chunk ids) of this document.
    #[must_use]
    pub fn rows(&self) -> Range<u32> {
        self.first_row..self.first_row.saturating_add(self.chunk_count)
    }

    /// The file's name, and an attachment's name inside it: `mail.eml › notes.md`.
    #[must_use]
    pub fn name(&self) -> String {
        document_name(&self.path, self.attachment.as_deref())
    }

    /// The page (numbered from 1) on which the text at byte `offset` stands, for a document
    /// of pages.
    #[must_use]
    pub fn page_at(&self, offset: usize) -> Option<u32> {
        let before = self
            .pages
            .partition_point(|&start| start as usize <= offset);
        (before > 0).then_some(before as u32)
    }
}

/// The committed state: the tantivy commit payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Catalog {
    /// Which generation of data files is current.
    pub generation: u64,
    /// Rows committed in the data files (live or not).
    pub rows: u32,
    /// Bytes committed in the strings file.
    pub string_bytes: u64,
    /// The next document slot to hand out.
    pub next_slot: u32,
    /// Live documents, in row order.
    pub documents: Vec<DocumentEntry>,
}

impl Catalog {
    /// Rows owned by no document.
    #[must_use]
    pub fn dead_rows(&self) -> u32 {
        let live = self
            .documents
            .iter()
            .map(|d| u64::from(d.chunk_count))
            .sum::<u64>();
        (u64::from(self.rows).saturating_sub(live)) as u32
    }

    /// What does not add up, for each document (by its place in `documents`) it concerns: rows
    /// past the committed ones, overlapping or out of order, slots used twice or never handed out.
    pub(crate) fn problems(&self) -> Vec<(usize, String)> {
        let mut problems = Vec::new();
        let mut slots = std::collections::HashSet::new();
        let mut end_so_far = 0;
        for (i, document) in self.documents.iter().enumerate() {
            let rows = document.rows();
            if document.chunk_count == 0 || rows.end > self.rows {
                problems.push((
                    i,
                    format!("rows {rows:?} are not among the {} committed", self.rows),
                ));
            } else if rows.start < end_so_far {
                problems.push((
                    i,
                    format!("rows {rows:?} overlap those of the document before"),
                ));
            } else if document.slot >= self.next_slot || !slots.insert(document.slot) {
                problems.push((
                    i,
                    format!(
                        "slot {} is used twice or was never handed out",
                        document.slot
                    ),
                ));
            } else {
                end_so_far = rows.end;
            }
        }
        problems
    }

    /// Bytes the vectors, records and strings files must hold, or `None` when they would not
    /// fit in memory (a damaged row count or dimension).
    pub(crate) fn committed_lengths(&self, manifest: &Manifest) -> Option<[u64; 3]> {
        let rows = u64::from(self.rows);
        let vectors = rows.checked_mul(manifest.row_bytes() as u64)?;
        let lengths = [vectors, rows * RECORD_BYTES as u64, self.string_bytes];
        lengths
            .iter()
            .all(|&l| usize::try_from(l).is_ok())
            .then_some(lengths)
    }
}

/// Size of one chunk record in `chunks.<gen>.bin`.
pub(crate) const RECORD_BYTES: usize = 56;
/// Where in a record the offset of its text lies (8 bytes).
const TEXT_OFFSET_AT: usize = 36;

/// The checksum of a document's rows as stored: each row's vector bytes, its record but for
/// where its text lies (a compaction moves the text, not what it says), its text and heading
/// path. Its first 8 bytes of blake3 find damage; they are no defence against forgery.
pub(crate) struct RowsChecksum(blake3::Hasher);

impl RowsChecksum {
    pub(crate) fn new() -> Self {
        Self(blake3::Hasher::new())
    }

    /// Adds one row: `record` is its encoded record, `text` and `heading` its strings.
    pub(crate) fn add(&mut self, vector: &[u8], record: &[u8], text: &[u8], heading: &[u8]) {
        self.0.update(vector);
        self.0.update(&record[..TEXT_OFFSET_AT]);
        self.0.update(&record[TEXT_OFFSET_AT + 8..]);
        self.0.update(text);
        self.0.update(heading);
    }

    pub(crate) fn finish(&self) -> u64 {
        let mut first = [0; 8];
        first.copy_from_slice(&self.0.finalize().as_bytes()[..8]);
        u64::from_le_bytes(first)
    }
}

/// A chunk's fixed-size record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ChunkRecord {
    pub slot: u32,
    pub ordinal: u32,
    pub bytes: (u32, u32),
    pub chars: (u32, u32),
    pub token_count: u32,
    pub section: Option<u32>,
    /// cos(this chunk, the next one in its document); NaN for a document's last chunk.
    pub continuity_next: f32,
    /// Where the cut to the next chunk fell; `None` for a document's last chunk.
    pub seam_next: Option<SeamKind>,
    pub text_offset: u64,
    pub text_len: u32,
    pub heading_len: u32,
}

impl ChunkRecord {
    pub(crate) fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut out = [0u8; RECORD_BYTES];
        let words = [
            self.slot,
            self.ordinal,
            self.bytes.0,
            self.bytes.1,
            self.chars.0,
            self.chars.1,
            self.token_count,
            self.section.unwrap_or(u32::MAX),
            self.continuity_next.to_bits(),
        ];
        for (i, word) in words.iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&word.to_le_bytes());
        }
        out[TEXT_OFFSET_AT..TEXT_OFFSET_AT + 8].copy_from_slice(&self.text_offset.to_le_bytes());
        out[44..48].copy_from_slice(&self.text_len.to_le_bytes());
        out[48..52].copy_from_slice(&self.heading_len.to_le_bytes());
        let seam = self
            .seam_next
            .map_or(u32::MAX, |kind| u32::from(kind.code()));
        out[52..56].copy_from_slice(&seam.to_le_bytes());
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Self {
        let word =
            |i: usize| u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap_or_default());
        let mut offset = [0u8; 8];
        offset.copy_from_slice(&bytes[TEXT_OFFSET_AT..TEXT_OFFSET_AT + 8]);
        Self {
            slot: word(0),
            ordinal: word(1),
            bytes: (word(2), word(3)),
            chars: (word(4), word(5)),
            token_count: word(6),
            section: Some(word(7)).filter(|&s| s != u32::MAX),
            continuity_next: f32::from_bits(word(8)),
            text_offset: u64::from_le_bytes(offset),
            text_len: word(11),
            heading_len: word(12),
            seam_next: u8::try_from(word(13)).ok().and_then(SeamKind::from_code),
        }
    }
}

/// The tantivy fields.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TextFields {
    pub slot: Field,
    pub ordinal: Field,
    pub text: Field,
}

impl TextFields {
    /// The schema of a text index whose text `analyzer` cuts, and its fields (the same in
    /// every schema).
    pub(crate) fn schema(analyzer: Analyzer) -> (Schema, Self) {
        let mut builder = Schema::builder();
        let indexing = TEXT
            .get_indexing_options()
            .cloned()
            .unwrap_or_default()
            .set_tokenizer(analyzer.tantivy_name());
        let fields = Self {
            // Fast fields: BM25 hits are mapped back to chunks without loading stored documents.
            slot: builder.add_u64_field("slot", INDEXED | STORED | FAST),
            ordinal: builder.add_u64_field("ordinal", STORED | FAST),
            text: builder.add_text_field("text", TEXT.set_indexing_options(indexing)),
        };
        (builder.build(), fields)
    }
}

pub(crate) fn read_manifest(dir: &Path) -> Result<Manifest> {
    let manifest = read_any_manifest(dir)?;
    if manifest.format_version != FORMAT_VERSION {
        return Err(IndexError::OtherFormat {
            dir: dir.to_owned(),
            found: manifest.format_version,
            reads: FORMAT_VERSION,
        });
    }
    Ok(manifest)
}

/// The manifest of an index of any format version.
pub(crate) fn read_any_manifest(dir: &Path) -> Result<Manifest> {
    let path = IndexFile::Manifest.path(dir);
    if !path.is_file() {
        return Err(IndexError::NotAnIndex(dir.to_owned()));
    }
    let text = fs_err::read_to_string(&path).map_err(io_error(&path))?;
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| IndexError::unparsable(dir, &path, "unreadable JSON", e))?;
    if manifest.model.dimension == 0 {
        return Err(IndexError::damaged(
            dir,
            &path,
            "its model has 0 dimensions",
        ));
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_record() -> ChunkRecord {
        ChunkRecord {
            slot: 7,
            ordinal: 3,
            bytes: (100, 260),
            chars: (98, 250),
            token_count: 41,
            section: Some(2),
            continuity_next: 0.625,
            text_offset: 5_000_000_000,
            text_len: 160,
            heading_len: 12,
            seam_next: Some(SeamKind::SentenceEnd),
        }
    }

    #[test]
    fn chunk_records_round_trip() {
        let record = sample_record();
        assert_eq!(ChunkRecord::decode(&record.encode()), record);
        let last = ChunkRecord {
            section: None,
            continuity_next: f32::NAN,
            seam_next: None,
            ..record
        };
        let decoded = ChunkRecord::decode(&last.encode());
        assert_eq!((decoded.section, decoded.seam_next), (None, None));
        assert!(decoded.continuity_next.is_nan());
    }

    #[test]
    fn a_rows_checksum_ignores_where_the_text_lies_and_nothing_else() {
        let checksum = |record: &ChunkRecord, vector: &[u8], text: &str| {
            let mut sum = RowsChecksum::new();
            sum.add(vector, &record.encode(), text.as_bytes(), b"Intro");
            sum.finish()
        };
        let record = sample_record();
        let vector = [0, 0, 128, 63];
        let original = checksum(&record, &vector, "a text");
        let moved = ChunkRecord {
            text_offset: 17,
            ..record
        };
        assert_eq!(checksum(&moved, &vector, "a text"), original);
        let other_section = ChunkRecord {
            section: Some(3),
            ..record
        };
        assert_ne!(checksum(&other_section, &vector, "a text"), original);
        assert_ne!(checksum(&record, &[0, 0, 128, 191], "a text"), original);
        assert_ne!(checksum(&record, &vector, "A text"), original);
    }

    #[test]
    fn dead_rows_are_rows_no_document_owns() {
        let document = |slot, first_row, chunk_count| DocumentEntry {
            slot,
            path: PathBuf::from(format!("{slot}.txt")),
            attachment: None,
            hash: String::new(),
            size: 0,
            modified_ns: 0,
            first_row,
            chunk_count,
            pages: Vec::new(),
            reached_from: None,
            checksum: None,
            language: None,
        };
        let catalog = Catalog {
            rows: 10,
            documents: vec![document(0, 0, 3), document(2, 6, 4)],
            ..Catalog::default()
        };
        assert_eq!(catalog.dead_rows(), 3);
        assert_eq!(catalog.documents[1].rows(), 6..10);
    }

    #[test]
    fn a_chunk_stands_on_the_page_whose_start_it_follows() {
        let json = r#"{"slot":1,"path":"/d/a.pdf","hash":"h","size":2,"modified_ns":3,
            "first_row":0,"chunk_count":4}"#;
        let mut entry: DocumentEntry = serde_json::from_str(json).unwrap();
        // A catalog written before pages were kept: no pages, nothing guessed.
        assert!(entry.pages.is_empty());
        assert_eq!(entry.page_at(0), None);
        entry.pages = vec![0, 100, 100, 250];
        let pages: Vec<Option<u32>> = [0, 99, 100, 249, 250, 9_999]
            .map(|offset| entry.page_at(offset))
            .to_vec();
        // Page 2 is empty: text at its start belongs to page 3, which starts there too.
        assert_eq!(
            pages,
            [Some(1), Some(1), Some(3), Some(3), Some(4), Some(4)]
        );
        let written = serde_json::to_string(&entry).unwrap();
        assert_eq!(
            serde_json::from_str::<DocumentEntry>(&written).unwrap(),
            entry
        );
    }

    #[test]
    fn paths_round_trip_whatever_their_bytes() {
        use std::os::unix::ffi::OsStrExt;

        let entry = |path: PathBuf| DocumentEntry {
            slot: 1,
            path,
            attachment: None,
            hash: "h".into(),
            size: 2,
            modified_ns: 3,
            first_row: 0,
            chunk_count: 1,
            pages: Vec::new(),
            reached_from: None,
            checksum: None,
            language: None,
        };
        let odd = entry(PathBuf::from(std::ffi::OsStr::from_bytes(
            b"/d/bad\xffname.txt",
        )));
        let json = serde_json::to_string(&odd).unwrap();
        assert_eq!(serde_json::from_str::<DocumentEntry>(&json).unwrap(), odd);
        // What every catalog so far has written, a path as a string, reads as before.
        let plain = r#"{"slot":1,"path":"/d/a.txt","hash":"h","size":2,"modified_ns":3,"first_row":0,"chunk_count":1}"#;
        let read: DocumentEntry = serde_json::from_str(plain).unwrap();
        assert_eq!(read, entry(PathBuf::from("/d/a.txt")));
        assert_eq!(serde_json::to_string(&read).unwrap(), plain);
    }

    #[test]
    fn another_format_version_names_the_command_that_rebuilds() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = Manifest::new(
            scar_embed::ModelInfo {
                id: "m".into(),
                dimension: 2,
                pooling: scar_embed::Pooling::Mean,
                max_tokens: 8,
                query_prefix: String::new(),
                passage_prefix: String::new(),
            },
            ChunkerConfig::default(),
            VectorEncoding::F32,
        );
        let old = Manifest {
            format_version: 1,
            ..manifest
        };
        fs_err::write(
            IndexFile::Manifest.path(dir.path()),
            serde_json::to_string(&old).unwrap(),
        )
        .unwrap();
        let message = read_manifest(dir.path()).unwrap_err().to_string();
        assert!(message.contains("format 1"), "{message}");
        assert!(message.contains("index --rebuild"), "{message}");
        assert_eq!(message.lines().count(), 1, "{message}");
        assert_eq!(read_any_manifest(dir.path()).unwrap(), old);
    }

    #[test]
    fn a_manifest_that_does_not_parse_keeps_the_parser_error() {
        use std::error::Error;

        let dir = tempfile::tempdir().unwrap();
        fs_err::write(IndexFile::Manifest.path(dir.path()), "{ not json").unwrap();
        let error = read_manifest(dir.path()).unwrap_err();
        assert!(matches!(error, IndexError::Damaged { .. }), "{error:?}");
        assert!(error.source().is_some());
    }
}
