//! The index folder on disk and the read side.
//!
//! ```text
//! manifest.json          model, chunker, vector encoding, format version (written once)
//! text/                  tantivy: BM25 over chunk text, keyed by (document slot, ordinal)
//! vectors.<gen>.bin      one embedding per row, f32 or f16, rows of a document contiguous
//! chunks.<gen>.bin       one fixed-size record per row (position, ranges, continuity, ...)
//! strings.<gen>.bin      chunk texts and heading paths, UTF-8, addressed from the records
//! ```
//!
//! The three data files are append-only. The single commit point is a tantivy commit whose
//! payload is the [`Catalog`]: which documents exist, which rows they own, and how long each
//! data file is. A crash before that commit leaves bytes past the committed lengths, which the
//! next writer truncates; a crash after it loses nothing. Rows owned by no document (from
//! replaced or deleted files) are compacted into a new generation of files by the writer.

use std::ops::Range;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use scar_core::{ChunkId, Position, Side, cosine};
use serde::{Deserialize, Serialize};
use tantivy::schema::{Field, INDEXED, STORED, Schema, TEXT, Value};

use crate::chunk::ChunkerConfig;
use crate::hnsw::{HnswGraph, HnswInfo};
use crate::{IndexError, Result};

/// Bumped whenever the on-disk layout changes.
pub const FORMAT_VERSION: u32 = 1;

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
}

impl Manifest {
    /// Bytes of one stored vector.
    pub(crate) fn row_bytes(&self) -> usize {
        self.model.dimension * self.vectors.bytes()
    }
}

/// One indexed document, as the catalog records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentEntry {
    /// Stable id of this version of the document (never reused).
    pub slot: u32,
    /// Canonical path of the file.
    pub path: PathBuf,
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
}

/// A file's size and modification time (ns since the epoch): the cheap check that it has not
/// changed since it was indexed.
#[must_use]
pub fn file_stamp(metadata: &std::fs::Metadata) -> (u64, u64) {
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
        self.first_row..self.first_row + self.chunk_count
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
        self.rows - self.documents.iter().map(|d| d.chunk_count).sum::<u32>()
    }
}

/// Size of one chunk record in `chunks.<gen>.bin`.
pub(crate) const RECORD_BYTES: usize = 52;

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
        out[36..44].copy_from_slice(&self.text_offset.to_le_bytes());
        out[44..48].copy_from_slice(&self.text_len.to_le_bytes());
        out[48..52].copy_from_slice(&self.heading_len.to_le_bytes());
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Self {
        let word =
            |i: usize| u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap_or_default());
        let mut offset = [0u8; 8];
        offset.copy_from_slice(&bytes[36..44]);
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
    pub(crate) fn schema() -> (Schema, Self) {
        let mut builder = Schema::builder();
        let fields = Self {
            slot: builder.add_u64_field("slot", INDEXED | STORED),
            ordinal: builder.add_u64_field("ordinal", STORED),
            text: builder.add_text_field("text", TEXT),
        };
        (builder.build(), fields)
    }
}

pub(crate) fn manifest_path(dir: &Path) -> PathBuf {
    dir.join("manifest.json")
}

pub(crate) fn text_dir(dir: &Path) -> PathBuf {
    dir.join("text")
}

/// The three data files of a generation.
pub(crate) fn data_files(dir: &Path, generation: u64) -> [PathBuf; 3] {
    ["vectors", "chunks", "strings"].map(|name| dir.join(format!("{name}.{generation}.bin")))
}

pub(crate) fn io_error(path: &Path) -> impl Fn(std::io::Error) -> IndexError + '_ {
    move |source| IndexError::Io {
        path: path.to_owned(),
        source,
    }
}

pub(crate) fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = manifest_path(dir);
    if !path.is_file() {
        return Err(IndexError::NotAnIndex(dir.to_owned()));
    }
    let text = fs_err::read_to_string(&path).map_err(io_error(&path))?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(|e| IndexError::Corrupt {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    if manifest.format_version != FORMAT_VERSION {
        return Err(IndexError::Corrupt {
            path,
            reason: format!(
                "format version {} (this build reads {FORMAT_VERSION}); rebuild the index",
                manifest.format_version
            ),
        });
    }
    Ok(manifest)
}

pub(crate) fn read_catalog(dir: &Path, tantivy: &tantivy::Index) -> Result<Catalog> {
    let metas = tantivy
        .load_metas()
        .map_err(|e| IndexError::text(dir, &e))?;
    match metas.payload {
        None => Ok(Catalog::default()),
        Some(payload) => serde_json::from_str(&payload).map_err(|e| IndexError::Corrupt {
            path: text_dir(dir),
            reason: format!("commit payload: {e}"),
        }),
    }
}

fn map_file(path: &Path, committed: u64) -> Result<Option<Mmap>> {
    let file = fs_err::File::open(path).map_err(io_error(path))?;
    let actual = file.metadata().map_err(io_error(path))?.len();
    if actual < committed {
        return Err(IndexError::Corrupt {
            path: path.to_owned(),
            reason: format!("{actual} bytes, but {committed} were committed"),
        });
    }
    if committed == 0 {
        return Ok(None);
    }
    // SAFETY: the data files are append-only; committed bytes are never rewritten in place
    // (compaction writes a new generation), so the mapped prefix stays valid while mapped.
    #[allow(unsafe_code)]
    let map = unsafe { Mmap::map(file.file()) }.map_err(io_error(path))?;
    Ok(Some(map))
}

/// Embedding rows, mapped (f32, with the committed byte length) or widened into memory (f16).
enum Vectors {
    Mapped(Option<Mmap>, usize),
    Widened(Vec<f32>),
}

/// A chunk as a reader sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkView<'a> {
    /// Its id (row).
    pub id: ChunkId,
    /// Its document.
    pub document: &'a DocumentEntry,
    /// Its ordinal within the document.
    pub ordinal: u32,
    /// Byte range in the document's text.
    pub bytes: Range<usize>,
    /// Character range in the document's text.
    pub chars: Range<usize>,
    /// Tokens of the embedding model's tokenizer, without special tokens.
    pub token_count: usize,
    /// Innermost enclosing heading's index, if the document has headings.
    pub section: Option<u32>,
    /// Headings enclosing the chunk, joined by " > ".
    pub heading_path: &'a str,
    /// The chunk's own text.
    pub text: &'a str,
}

/// An open index, for reading.
pub struct Index {
    dir: PathBuf,
    manifest: Manifest,
    catalog: Catalog,
    vectors: Vectors,
    records: Option<Mmap>,
    strings: Option<Mmap>,
    /// For each row, the index of its document in `catalog.documents` (`u32::MAX`: dead row).
    row_documents: Vec<u32>,
    text: tantivy::Index,
    text_reader: tantivy::IndexReader,
    fields: TextFields,
    /// The HNSW graph, when the index has a current one (`scar index --hnsw`).
    hnsw: Option<HnswGraph>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("dir", &self.dir)
            .field("chunks", &self.len())
            .finish_non_exhaustive()
    }
}

impl Index {
    /// Opens the index in `dir` as of its last commit.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_owned();
        let manifest = read_manifest(&dir)?;
        let text =
            tantivy::Index::open_in_dir(text_dir(&dir)).map_err(|e| IndexError::text(&dir, &e))?;
        let catalog = read_catalog(&dir, &text)?;
        let [vector_path, record_path, string_path] = data_files(&dir, catalog.generation);
        let rows = u64::from(catalog.rows);
        let row_bytes = manifest.row_bytes() as u64;
        let vector_map = map_file(&vector_path, rows * row_bytes)?;
        let vectors = match manifest.vectors {
            // Only the committed prefix: a crashed writer may have left a torn row after it.
            VectorEncoding::F32 => Vectors::Mapped(vector_map, (rows * row_bytes) as usize),
            VectorEncoding::F16 => Vectors::Widened(vector_map.map_or_else(Vec::new, |map| {
                let halves: &[half::f16] =
                    bytemuck::cast_slice(&map[..(rows * row_bytes) as usize]);
                halves.iter().map(|h| h.to_f32()).collect()
            })),
        };
        let records = map_file(&record_path, rows * RECORD_BYTES as u64)?;
        let strings = map_file(&string_path, catalog.string_bytes)?;
        let mut row_documents = vec![u32::MAX; catalog.rows as usize];
        for (i, document) in catalog.documents.iter().enumerate() {
            for row in document.rows() {
                row_documents[row as usize] = i as u32;
            }
        }
        let text_reader = text.reader().map_err(|e| IndexError::text(&dir, &e))?;
        let (_, fields) = TextFields::schema();
        let hnsw = HnswGraph::open(&dir, &catalog, manifest.model.dimension, false)?;
        Ok(Self {
            dir,
            manifest,
            catalog,
            vectors,
            records,
            strings,
            row_documents,
            text,
            text_reader,
            fields,
            hnsw,
        })
    }

    /// What the HNSW graph covers, when the index has a current one (dense search then uses it).
    #[must_use]
    pub fn hnsw(&self) -> Option<HnswInfo> {
        self.hnsw.as_ref().map(|graph| HnswInfo {
            generation: self.catalog.generation,
            rows: graph.rows(),
            params: graph.params(),
        })
    }

    pub(crate) fn hnsw_graph(&self) -> Option<&HnswGraph> {
        self.hnsw.as_ref()
    }

    /// True for a row that belongs to a live document.
    pub(crate) fn is_live(&self, row: u32) -> bool {
        self.row_documents
            .get(row as usize)
            .is_some_and(|&document| document != u32::MAX)
    }

    /// The folder this index lives in.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the index was built with.
    #[must_use]
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The indexed documents, in row order.
    #[must_use]
    pub fn documents(&self) -> &[DocumentEntry] {
        &self.catalog.documents
    }

    /// The committed catalog.
    #[must_use]
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Number of live chunks.
    #[must_use]
    pub fn len(&self) -> usize {
        self.catalog
            .documents
            .iter()
            .map(|d| d.chunk_count as usize)
            .sum()
    }

    /// True when nothing is indexed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Iterates over every live chunk id, in row order.
    pub fn chunk_ids(&self) -> impl Iterator<Item = ChunkId> + '_ {
        self.catalog
            .documents
            .iter()
            .flat_map(|d| d.rows().map(ChunkId))
    }

    fn record(&self, id: ChunkId) -> ChunkRecord {
        let start = id.index() * RECORD_BYTES;
        let records = self.records.as_deref().unwrap_or_default();
        ChunkRecord::decode(&records[start..start + RECORD_BYTES])
    }

    fn document_of(&self, id: ChunkId) -> Option<&DocumentEntry> {
        let slot = *self.row_documents.get(id.index())?;
        self.catalog.documents.get(slot as usize)
    }

    /// True when `id` is a live chunk of this index.
    #[must_use]
    pub fn contains(&self, id: ChunkId) -> bool {
        self.document_of(id).is_some()
    }

    /// Everything about a live chunk; `None` for an id this index does not hold.
    #[must_use]
    pub fn chunk(&self, id: ChunkId) -> Option<ChunkView<'_>> {
        let document = self.document_of(id)?;
        let record = self.record(id);
        let strings = self.strings.as_deref().unwrap_or_default();
        let start = record.text_offset as usize;
        let text_end = start + record.text_len as usize;
        let heading_end = text_end + record.heading_len as usize;
        // Written by us from &str slices at char boundaries, so always valid UTF-8.
        let text = std::str::from_utf8(&strings[start..text_end]).unwrap_or_default();
        let heading_path = std::str::from_utf8(&strings[text_end..heading_end]).unwrap_or_default();
        Some(ChunkView {
            id,
            document,
            ordinal: record.ordinal,
            bytes: record.bytes.0 as usize..record.bytes.1 as usize,
            chars: record.chars.0 as usize..record.chars.1 as usize,
            token_count: record.token_count as usize,
            section: record.section,
            heading_path,
            text,
        })
    }

    /// The chunk's embedding (unit length).
    #[must_use]
    pub fn embedding(&self, id: ChunkId) -> &[f32] {
        let dimension = self.manifest.model.dimension;
        &self.matrix()[id.index() * dimension..(id.index() + 1) * dimension]
    }

    /// Every stored row, dead ones included, laid end to end.
    pub(crate) fn matrix(&self) -> &[f32] {
        match &self.vectors {
            Vectors::Mapped(map, committed) => {
                bytemuck::cast_slice(map.as_deref().map_or(&[][..], |m| &m[..*committed]))
            }
            Vectors::Widened(rows) => rows,
        }
    }

    /// The chunk's (document, ordinal).
    #[must_use]
    pub fn position(&self, id: ChunkId) -> Position {
        let record = self.record(id);
        Position {
            document: record.slot,
            ordinal: record.ordinal,
        }
    }

    /// The adjacent chunk on `side` in the same document, or `None` at the document's edge.
    #[must_use]
    pub fn neighbour(&self, id: ChunkId, side: Side) -> Option<ChunkId> {
        let rows = self.document_of(id)?.rows();
        let candidate = match side {
            Side::Previous => id.0.checked_sub(1)?,
            Side::Next => id.0.checked_add(1)?,
        };
        rows.contains(&candidate).then_some(ChunkId(candidate))
    }

    /// The stored cos(chunk, next chunk in its document), computed at indexing time.
    #[must_use]
    pub fn continuity_next(&self, id: ChunkId) -> Option<f32> {
        self.neighbour(id, Side::Next)
            .map(|_| self.record(id).continuity_next)
    }

    /// BM25 over chunk text: up to `k` live chunks, best first, with their scores.
    pub fn bm25_search(&self, query: &str, k: usize) -> Result<Vec<(ChunkId, f32)>> {
        let searcher = self.text_reader.searcher();
        let parser = tantivy::query::QueryParser::for_index(&self.text, vec![self.fields.text]);
        // Questions are prose, not query syntax: a stray quote or colon must not fail the search.
        let (query, _) = parser.parse_query_lenient(query);
        let top = searcher
            .search(
                &query,
                &tantivy::collector::TopDocs::with_limit(k.max(1)).order_by_score(),
            )
            .map_err(|e| IndexError::text(&self.dir, &e))?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: tantivy::TantivyDocument = searcher
                .doc(address)
                .map_err(|e| IndexError::text(&self.dir, &e))?;
            let number = |field| doc.get_first(field).and_then(|v| v.as_u64());
            let (Some(slot), Some(ordinal)) =
                (number(self.fields.slot), number(self.fields.ordinal))
            else {
                continue;
            };
            if let Some(document) = self
                .catalog
                .documents
                .iter()
                .find(|d| u64::from(d.slot) == slot)
            {
                hits.push((ChunkId(document.first_row + ordinal as u32), score));
            }
        }
        Ok(hits)
    }

    /// Checks what a crash must never break: every live chunk has its record, its vector (unit
    /// length, finite) and its text; ordinals are contiguous; stored continuity equals the
    /// recomputed cosine; tantivy holds exactly the live documents. Returns the problems found.
    pub fn verify(&self) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        let mut seen_rows = 0u32;
        for document in &self.catalog.documents {
            if document.first_row < seen_rows || document.rows().end > self.catalog.rows {
                problems.push(format!(
                    "{}: rows {:?} overlap or overrun",
                    document.path.display(),
                    document.rows()
                ));
                continue;
            }
            seen_rows = document.rows().end;
            for (ordinal, row) in document.rows().enumerate() {
                let id = ChunkId(row);
                let record = self.record(id);
                if record.slot != document.slot || record.ordinal != ordinal as u32 {
                    problems.push(format!(
                        "chunk {id}: record says slot {} ordinal {}",
                        record.slot, record.ordinal
                    ));
                }
                let vector = self.embedding(id);
                let length: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
                if !vector.iter().all(|x| x.is_finite()) || (length - 1.0).abs() > 1e-2 {
                    problems.push(format!("chunk {id}: vector is not a finite unit vector"));
                }
                if let Some(next) = self.neighbour(id, Side::Next) {
                    let expected = cosine(vector, self.embedding(next));
                    if (expected - record.continuity_next).abs() > 1e-3 {
                        problems.push(format!(
                            "chunk {id}: stored continuity {} but cosine is {expected}",
                            record.continuity_next
                        ));
                    }
                }
                if self.chunk(id).is_none_or(|c| c.text.is_empty()) {
                    problems.push(format!("chunk {id}: no text"));
                }
            }
        }
        let searcher = self.text_reader.searcher();
        let live_docs: u64 = searcher
            .segment_readers()
            .iter()
            .map(|r| u64::from(r.num_docs()))
            .sum();
        if live_docs != self.len() as u64 {
            problems.push(format!(
                "text index holds {live_docs} chunks, catalog {}",
                self.len()
            ));
        }
        Ok(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_records_round_trip() {
        let record = ChunkRecord {
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
        };
        assert_eq!(ChunkRecord::decode(&record.encode()), record);
        let last = ChunkRecord {
            section: None,
            continuity_next: f32::NAN,
            ..record
        };
        let decoded = ChunkRecord::decode(&last.encode());
        assert_eq!(decoded.section, None);
        assert!(decoded.continuity_next.is_nan());
    }

    #[test]
    fn dead_rows_are_rows_no_document_owns() {
        let document = |slot, first_row, chunk_count| DocumentEntry {
            slot,
            path: PathBuf::from(format!("{slot}.txt")),
            hash: String::new(),
            size: 0,
            modified_ns: 0,
            first_row,
            chunk_count,
        };
        let catalog = Catalog {
            rows: 10,
            documents: vec![document(0, 0, 3), document(2, 6, 4)],
            ..Catalog::default()
        };
        assert_eq!(catalog.dead_rows(), 3);
        assert_eq!(catalog.documents[1].rows(), 6..10);
    }
}
