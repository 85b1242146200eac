//! The write side: appends documents' rows to the data files and the text index, tracks the
//! catalog, commits, and compacts dead rows into a new generation.

use std::io::Write;
use std::path::{Path, PathBuf};

use scar_core::cosine;
use tantivy::{TantivyDocument, Term, doc};

use super::data::{check_committed, committed_lengths};
use super::format::{
    Catalog, ChunkRecord, DocumentEntry, Manifest, RECORD_BYTES, RowsChecksum, TextFields,
    VectorEncoding, read_manifest,
};
use super::reader::Index;
use super::text_dir::{Access, create_text, open_text, read_catalog};
use crate::chunk::ChunkSpan;
use crate::error::io_error;
use crate::folder::{IndexFile, write_replacing};
use crate::{IndexError, Result};

/// A new version of a file, cut into chunks and embedded: what [`Writer::append`] stores.
pub(crate) struct NewDocument<'a> {
    /// The file.
    pub path: &'a Path,
    /// The attachment's name, for a document carried inside the file.
    pub attachment: Option<&'a str>,
    /// blake3 of its bytes.
    pub hash: &'a str,
    /// Its size and modification time (ns since the epoch).
    pub size: u64,
    /// See `size`.
    pub modified_ns: u64,
    /// Its text, into which the chunks' ranges point.
    pub text: &'a str,
    /// Where each of its pages starts in `text`, for a document of pages.
    pub pages: &'a [usize],
    /// Its chunks, in order.
    pub chunks: &'a [ChunkSpan],
    /// The chunks' embeddings, one row each, laid end to end.
    pub vectors: &'a [f32],
    /// The chunks' lengths in tokens.
    pub token_counts: &'a [usize],
    /// Where it was found through a link, when it lies outside the folder indexed.
    pub reached_from: Option<&'a Path>,
}

/// The open write side of an index: appends rows, tracks the catalog, commits.
pub(crate) struct Writer {
    dir: PathBuf,
    manifest: Manifest,
    catalog: Catalog,
    text: tantivy::IndexWriter<TantivyDocument>,
    fields: TextFields,
    files: [fs_err::File; 3],
}

impl Writer {
    /// Opens the index in `dir` for writing, creating it with `manifest` if there is none. An
    /// existing index keeps its own manifest, but must hold vectors of `manifest`'s model.
    pub(crate) fn open(dir: &Path, manifest: Manifest) -> Result<Self> {
        let manifest = if IndexFile::Manifest.path(dir).is_file() {
            let existing = read_manifest(dir)?;
            if !existing.model.embeds_like(&manifest.model) {
                let (index_model, requested) = existing.model.names_against(&manifest.model);
                return Err(IndexError::ModelMismatch {
                    dir: dir.to_owned(),
                    index_model,
                    requested,
                });
            }
            existing
        } else {
            create(dir, manifest)?
        };
        let text = open_text(dir, Access::Write)?;
        let writer = text.writer(50_000_000).map_err(|e| match e {
            tantivy::TantivyError::LockFailure(..) => IndexError::Busy(dir.to_owned()),
            other => IndexError::text(dir, other),
        })?;
        // What is there must be sound before anything is added to it or compacted.
        Index::open(dir)?;
        let catalog = read_catalog(dir, &text)?;
        remove_stale_generations(dir, catalog.generation)?;
        let files = open_data_files(dir, &manifest, &catalog)?;
        let (_, fields) = TextFields::schema(manifest.analyzer);
        Ok(Self {
            dir: dir.to_owned(),
            manifest,
            catalog,
            text: writer,
            fields,
            files,
        })
    }

    /// What the index was built with.
    pub(crate) fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The documents as of the last change (committed or not), in row order.
    pub(crate) fn documents(&self) -> &[DocumentEntry] {
        &self.catalog.documents
    }

    /// Drops the document in `slot` (its rows stay until a compaction).
    pub(crate) fn remove(&mut self, slot: u32) {
        self.text
            .delete_term(Term::from_field_u64(self.fields.slot, u64::from(slot)));
        self.catalog.documents.retain(|d| d.slot != slot);
    }

    /// Records a new size and modification time for the document in `slot`, whose content is
    /// unchanged.
    pub(crate) fn touch(&mut self, slot: u32, size: u64, modified_ns: u64) {
        if let Some(entry) = self.catalog.documents.iter_mut().find(|d| d.slot == slot) {
            entry.size = size;
            entry.modified_ns = modified_ns;
        }
    }

    /// Appends a document's rows under a new slot (uncommitted).
    pub(crate) fn append(&mut self, document: &NewDocument<'_>) -> Result<()> {
        let slot = self.catalog.next_slot;
        self.catalog.next_slot += 1;
        let first_row = self.catalog.rows;
        let text = document.text;
        let embeddings: Vec<&[f32]> = document
            .vectors
            .chunks_exact(self.manifest.model.dimension)
            .collect();
        let mut vectors = Vec::new();
        let mut records = Vec::new();
        let mut strings = Vec::new();
        let mut checksum = RowsChecksum::new();
        for (ordinal, chunk) in document.chunks.iter().enumerate() {
            let vector = embeddings[ordinal];
            let vector_start = vectors.len();
            match self.manifest.vectors {
                VectorEncoding::F32 => vector.iter().for_each(|x| vectors.extend(x.to_le_bytes())),
                VectorEncoding::F16 => vector
                    .iter()
                    .for_each(|x| vectors.extend(half::f16::from_f32(*x).to_le_bytes())),
            }
            let continuity_next = embeddings
                .get(ordinal + 1)
                .map_or(f32::NAN, |next| cosine(vector, next));
            let own = &text[chunk.bytes.clone()];
            let record = ChunkRecord {
                slot,
                ordinal: ordinal as u32,
                bytes: (chunk.bytes.start as u32, chunk.bytes.end as u32),
                chars: (chunk.chars.start as u32, chunk.chars.end as u32),
                token_count: document.token_counts[ordinal] as u32,
                section: chunk.section,
                continuity_next,
                seam_next: chunk.seam_after,
                text_offset: self.catalog.string_bytes + strings.len() as u64,
                text_len: own.len() as u32,
                heading_len: chunk.heading_path.len() as u32,
            };
            let encoded = record.encode();
            checksum.add(
                &vectors[vector_start..],
                &encoded,
                own.as_bytes(),
                chunk.heading_path.as_bytes(),
            );
            records.extend(encoded);
            strings.extend(own.as_bytes());
            strings.extend(chunk.heading_path.as_bytes());
            self.text
                .add_document(doc!(
                    self.fields.slot => u64::from(slot),
                    self.fields.ordinal => ordinal as u64,
                    self.fields.text => format!("{} {own}", chunk.heading_path),
                ))
                .map_err(|e| IndexError::text(&self.dir, e))?;
        }
        for (file, bytes) in self.files.iter_mut().zip([&vectors, &records, &strings]) {
            file.write_all(bytes).map_err(|e| IndexError::Io {
                path: file.path().to_owned(),
                source: e,
            })?;
        }
        self.catalog.rows += document.chunks.len() as u32;
        self.catalog.string_bytes += strings.len() as u64;
        self.catalog.documents.push(DocumentEntry {
            slot,
            path: document.path.to_owned(),
            attachment: document.attachment.map(str::to_owned),
            hash: document.hash.to_owned(),
            size: document.size,
            modified_ns: document.modified_ns,
            first_row,
            chunk_count: document.chunks.len() as u32,
            pages: document.pages.iter().map(|&start| start as u32).collect(),
            reached_from: document.reached_from.map(Path::to_owned),
            checksum: Some(checksum.finish()),
            language: crate::detect_language(text).map(str::to_owned),
        });
        Ok(())
    }

    /// Makes the data durable, then publishes the catalog with the text index in one commit.
    pub(crate) fn commit(&mut self) -> Result<()> {
        for file in &self.files {
            file.sync_data().map_err(|e| IndexError::Io {
                path: file.path().to_owned(),
                source: e,
            })?;
        }
        let payload =
            serde_json::to_string(&self.catalog).map_err(IndexError::encode("the catalog"))?;
        let mut commit = self
            .text
            .prepare_commit()
            .map_err(|e| IndexError::text(&self.dir, e))?;
        commit.set_payload(&payload);
        commit
            .commit()
            .map_err(|e| IndexError::text(&self.dir, e))?;
        Ok(())
    }

    /// Rewrites the data files without dead rows, as a new generation, when there are any.
    fn compact(&mut self) -> Result<()> {
        if self.catalog.dead_rows() == 0 {
            return Ok(());
        }
        let old = IndexFile::data_paths(&self.dir, self.catalog.generation);
        let read = |path: &PathBuf| fs_err::read(path).map_err(io_error(path));
        let (vectors, records, strings) = (read(&old[0])?, read(&old[1])?, read(&old[2])?);
        let row_bytes = self.manifest.row_bytes();
        let mut next = Catalog {
            generation: self.catalog.generation + 1,
            ..self.catalog.clone()
        };
        let (mut new_vectors, mut new_records, mut new_strings) =
            (Vec::new(), Vec::new(), Vec::new());
        let mut row = 0u32;
        // The live rows were checked when the writer opened; a file that changed since is
        // reported, not sliced past its end.
        for document in &mut next.documents {
            let first = document.first_row as usize;
            let count = document.chunk_count as usize;
            new_vectors.extend_from_slice(part(
                &self.dir,
                &vectors,
                &old[0],
                first * row_bytes,
                count * row_bytes,
            )?);
            for r in first..first + count {
                let record_bytes =
                    part(&self.dir, &records, &old[1], r * RECORD_BYTES, RECORD_BYTES)?;
                let mut record = ChunkRecord::decode(record_bytes);
                let start = record.text_offset as usize;
                let length = record.text_len as usize + record.heading_len as usize;
                record.text_offset = new_strings.len() as u64;
                new_strings.extend_from_slice(part(&self.dir, &strings, &old[2], start, length)?);
                new_records.extend(record.encode());
            }
            document.first_row = row;
            row += document.chunk_count;
        }
        next.rows = row;
        next.string_bytes = new_strings.len() as u64;
        let new = IndexFile::data_paths(&self.dir, next.generation);
        for (path, bytes) in new.iter().zip([&new_vectors, &new_records, &new_strings]) {
            let mut file = fs_err::File::create(path).map_err(io_error(path))?;
            file.write_all(bytes).map_err(io_error(path))?;
            file.sync_data().map_err(io_error(path))?;
        }
        self.catalog = next;
        self.files = open_data_files(&self.dir, &self.manifest, &self.catalog)?;
        self.commit()?;
        remove_stale_generations(&self.dir, self.catalog.generation)
    }

    /// Commits, compacts the dead rows that leaves (if any), and waits for the text index's
    /// merges to end. Gives back the manifest and the catalog it committed.
    pub(crate) fn finish(mut self) -> Result<(Manifest, Catalog)> {
        self.commit()?;
        self.compact()?;
        self.text
            .wait_merging_threads()
            .map_err(|e| IndexError::text(&self.dir, e))?;
        Ok((self.manifest, self.catalog))
    }
}

/// `length` bytes of `bytes` (the content of `path`) from `start`. The live rows were checked
/// when the writer opened; a file that changed since is reported, not sliced past its end.
fn part<'a>(
    dir: &Path,
    bytes: &'a [u8],
    path: &Path,
    start: usize,
    length: usize,
) -> Result<&'a [u8]> {
    start
        .checked_add(length)
        .and_then(|end| bytes.get(start..end))
        .ok_or_else(|| IndexError::damaged(dir, path, "it is shorter than the catalog says"))
}

/// Creates a new index folder; the manifest is written last, so a folder without one is never
/// mistaken for an index.
fn create(dir: &Path, manifest: Manifest) -> Result<Manifest> {
    let text = IndexFile::Text.path(dir);
    if text.exists() {
        // Left by a crash during an earlier creation.
        fs_err::remove_dir_all(&text).map_err(io_error(&text))?;
    }
    fs_err::create_dir_all(&text).map_err(io_error(&text))?;
    // Vectors left by a run into an index that is gone would be of an unknown model.
    let journal = IndexFile::Journal.path(dir);
    if journal.exists() {
        fs_err::remove_file(&journal).map_err(io_error(&journal))?;
    }
    create_text(dir, manifest.analyzer)?;
    let json =
        serde_json::to_string_pretty(&manifest).map_err(IndexError::encode("the manifest"))?;
    write_replacing(&IndexFile::Manifest.path(dir), json)?;
    Ok(manifest)
}

/// Deletes data files of every generation but the committed one: the old generation once a
/// compaction is committed, or a new one whose compaction a crash interrupted.
fn remove_stale_generations(dir: &Path, committed: u64) -> Result<()> {
    for file in IndexFile::data_files_in(dir)? {
        if file.generation() != Some(committed) {
            let path = file.path(dir);
            fs_err::remove_file(&path).map_err(io_error(&path))?;
        }
    }
    Ok(())
}

/// Opens a generation's data files for appending, after cutting them back to their committed
/// lengths (dropping whatever a crash left behind).
fn open_data_files(
    dir: &Path,
    manifest: &Manifest,
    catalog: &Catalog,
) -> Result<[fs_err::File; 3]> {
    let current = IndexFile::data_paths(dir, catalog.generation);
    let lengths = committed_lengths(dir, manifest, catalog)?;
    let open = |path: &PathBuf, length: u64| -> Result<fs_err::File> {
        let file = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(path)
            .map_err(io_error(path))?;
        check_committed(dir, &file, length)?;
        file.set_len(length).map_err(io_error(path))?;
        Ok(file)
    };
    Ok([
        open(&current[0], lengths[0])?,
        open(&current[1], lengths[1])?,
        open(&current[2], lengths[2])?,
    ])
}
