//! The read side: an open index, as of its last commit.

use std::ops::Range;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use scar_core::{ChunkId, Position, SeamKind, Side, cosine};

use super::format::{
    Catalog, ChunkRecord, DocumentEntry, Manifest, RECORD_BYTES, VectorEncoding, check_committed,
    data_files, read_catalog, read_manifest,
};
use super::text_dir::{Access, open_text};
use crate::Result;
use crate::error::io_error;
use crate::hnsw::{HnswGraph, HnswInfo};
use crate::search::TextIndex;

fn map_file(path: &Path, committed: u64) -> Result<Option<Mmap>> {
    let file = fs_err::File::open(path).map_err(io_error(path))?;
    check_committed(&file, committed)?;
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
    /// The chunk texts, for BM25.
    text: TextIndex,
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
        let text = open_text(&dir, Access::Read)?;
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
        let text = TextIndex::new(&dir, text)?;
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

    pub(crate) fn text(&self) -> &TextIndex {
        &self.text
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

    /// Where the cut between the chunk and its neighbour on `side` fell, as the chunker saw it;
    /// `None` at the document's edge.
    #[must_use]
    pub fn seam(&self, id: ChunkId, side: Side) -> Option<SeamKind> {
        let left = match side {
            Side::Previous => self.neighbour(id, Side::Previous)?,
            Side::Next => id,
        };
        self.neighbour(left, Side::Next)?;
        self.record(left).seam_next
    }

    /// The live rows of the documents in `slots`, in row order.
    #[must_use]
    pub fn rows_of(&self, slots: &[u32]) -> Vec<u32> {
        self.catalog
            .documents
            .iter()
            .filter(|d| slots.contains(&d.slot))
            .flat_map(DocumentEntry::rows)
            .collect()
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
        let live_docs = self.text.live_chunks();
        if live_docs != self.len() as u64 {
            problems.push(format!(
                "text index holds {live_docs} chunks, catalog {}",
                self.len()
            ));
        }
        Ok(problems)
    }
}
