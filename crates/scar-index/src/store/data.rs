//! The data files of one generation read as they lie on disk, row by row: the reader reads the
//! committed rows through them and checks those against the catalog; a repair reads every row
//! it finds, trusting no catalog.

use std::path::Path;

use memmap2::Mmap;

use super::format::{Catalog, ChunkRecord, Manifest, RECORD_BYTES, VectorEncoding};
use crate::error::io_error;
use crate::folder::IndexFile;
use crate::{IndexError, Result};

/// Why a record's strings cannot be read.
pub(crate) enum StringsProblem {
    OutOfRange,
    NotUtf8,
}

/// The vectors, records and strings files of one generation, mapped.
pub(crate) struct DataFiles {
    encoding: VectorEncoding,
    vectors: Option<Mmap>,
    records: Option<Mmap>,
    strings: Option<Mmap>,
    /// Bytes of the vectors and the strings that are read: the committed ones, or all there are.
    vector_bytes: usize,
    string_bytes: usize,
    /// The committed f16 vectors widened to f32, so that every row reads as one matrix.
    widened: Option<Vec<f32>>,
    /// Each mapped file, held open with the bytes of it that are read.
    opened: MappedFiles,
}

impl DataFiles {
    /// The files as the catalog commits them: each must hold its committed bytes (a crash may
    /// leave more, never less) and only those are read; f16 vectors are widened into memory.
    pub(crate) fn open_committed(
        dir: &Path,
        manifest: &Manifest,
        catalog: &Catalog,
    ) -> Result<Self> {
        let lengths = committed_lengths(dir, manifest, catalog)?;
        let [vectors, records, strings] = IndexFile::data(catalog.generation);
        let mut opened = MappedFiles::default();
        let mut files = Self {
            encoding: manifest.vectors,
            vectors: map_committed(dir, &vectors.path(dir), lengths[0], &mut opened)?,
            records: map_committed(dir, &records.path(dir), lengths[1], &mut opened)?,
            strings: map_committed(dir, &strings.path(dir), lengths[2], &mut opened)?,
            vector_bytes: lengths[0] as usize,
            string_bytes: lengths[2] as usize,
            widened: None,
            opened,
        };
        if files.encoding == VectorEncoding::F16 {
            files.widened = Some(widen(files.vector_bytes(), VectorEncoding::F16));
        }
        Ok(files)
    }

    /// Whatever the files of `generation` in `dir` hold, its vectors stored as `encoding`; a
    /// missing or empty file reads as none.
    pub(crate) fn open_found(
        dir: &Path,
        generation: u64,
        encoding: VectorEncoding,
    ) -> Result<Self> {
        let mut opened = MappedFiles::default();
        let [vectors, records, strings] = IndexFile::data(generation);
        let vectors = map_found(&vectors.path(dir), &mut opened)?;
        let records = map_found(&records.path(dir), &mut opened)?;
        let strings = map_found(&strings.path(dir), &mut opened)?;
        Ok(Self {
            encoding,
            vector_bytes: vectors.as_deref().map_or(0, <[u8]>::len),
            string_bytes: strings.as_deref().map_or(0, <[u8]>::len),
            vectors,
            records,
            strings,
            widened: None,
            opened,
        })
    }

    /// A mapped file that is now shorter than the bytes read from it, if one is.
    pub(crate) fn cut_short(&self) -> Option<&Path> {
        self.opened.cut_short()
    }

    fn vector_bytes(&self) -> &[u8] {
        self.vectors
            .as_deref()
            .and_then(|map| map.get(..self.vector_bytes))
            .unwrap_or_default()
    }

    /// Every committed row's vector, dead ones included, laid end to end (files opened with
    /// [`DataFiles::open_committed`]).
    pub(crate) fn matrix(&self) -> &[f32] {
        match &self.widened {
            Some(rows) => rows,
            None => bytemuck::try_cast_slice(self.vector_bytes()).unwrap_or_default(),
        }
    }

    /// Rows that have both a record and a vector of `dimension`.
    pub(crate) fn rows(&self, dimension: usize) -> usize {
        let records = self.records.as_deref().map_or(0, <[u8]>::len) / RECORD_BYTES;
        let row_bytes = (self.encoding.bytes() * dimension).max(1);
        records.min(self.vector_bytes / row_bytes)
    }

    /// Row `row`'s vector of `dimension`, as f32.
    pub(crate) fn vector(&self, row: usize, dimension: usize) -> Option<Vec<f32>> {
        Some(widen(self.stored_vector(row, dimension)?, self.encoding))
    }

    /// Row `row`'s vector of `dimension`, as stored.
    pub(crate) fn stored_vector(&self, row: usize, dimension: usize) -> Option<&[u8]> {
        let row_bytes = self.encoding.bytes() * dimension;
        let start = row.checked_mul(row_bytes)?;
        self.vector_bytes()
            .get(start..start.checked_add(row_bytes)?)
    }

    /// Row `row`'s record.
    pub(crate) fn record(&self, row: usize) -> Option<ChunkRecord> {
        self.stored_record(row).map(ChunkRecord::decode)
    }

    /// Row `row`'s record, as stored.
    pub(crate) fn stored_record(&self, row: usize) -> Option<&[u8]> {
        let start = row.checked_mul(RECORD_BYTES)?;
        let records = self.records.as_deref().unwrap_or_default();
        records.get(start..start.checked_add(RECORD_BYTES)?)
    }

    /// A record's text and heading path, from the strings that are read.
    pub(crate) fn strings_of(&self, record: &ChunkRecord) -> Result<(&str, &str), StringsProblem> {
        let strings = self.strings.as_deref().unwrap_or_default();
        let readable = strings.len().min(self.string_bytes);
        let start = usize::try_from(record.text_offset).map_err(|_| StringsProblem::OutOfRange)?;
        let text_end = start.checked_add(record.text_len as usize);
        let heading_end = text_end.and_then(|end| end.checked_add(record.heading_len as usize));
        let (Some(text_end), Some(heading_end)) = (text_end, heading_end) else {
            return Err(StringsProblem::OutOfRange);
        };
        if heading_end > readable {
            return Err(StringsProblem::OutOfRange);
        }
        let utf8 = |range: std::ops::Range<usize>| {
            std::str::from_utf8(&strings[range]).map_err(|_| StringsProblem::NotUtf8)
        };
        Ok((utf8(start..text_end)?, utf8(text_end..heading_end)?))
    }
}

/// Files mapped into memory (by this reader, tantivy or usearch), each held open with the bytes
/// that are read from it: reading a mapped page that a file no longer has kills the process,
/// so a reader that stays open checks them before it reads. A file replaced on disk is no
/// danger: what was mapped stays readable while it is held.
#[derive(Default)]
pub(crate) struct MappedFiles(Vec<(fs_err::File, u64)>);

impl MappedFiles {
    /// Holds `file`, of which `read` bytes are read.
    pub(crate) fn hold(&mut self, file: fs_err::File, read: u64) {
        self.0.push((file, read));
    }

    /// Holds the file at `path`, all of which is read.
    pub(crate) fn hold_whole(&mut self, path: &Path) -> Result<()> {
        let file = fs_err::File::open(path).map_err(io_error(path))?;
        let length = file.metadata().map_err(io_error(path))?.len();
        self.hold(file, length);
        Ok(())
    }

    /// A file that is now shorter than the bytes read from it (cut on disk while it was held),
    /// if one is. One `fstat` a file.
    pub(crate) fn cut_short(&self) -> Option<&Path> {
        self.0
            .iter()
            .find(|(file, read)| file.metadata().map_or(true, |m| m.len() < *read))
            .map(|(file, _)| file.path())
    }
}

/// Stored vector bytes as f32 (the files are little-endian).
pub(crate) fn widen(bytes: &[u8], encoding: VectorEncoding) -> Vec<f32> {
    match encoding {
        VectorEncoding::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        VectorEncoding::F16 => bytes
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
    }
}

/// Bytes the vectors, records and strings files must hold for `catalog`.
pub(crate) fn committed_lengths(
    dir: &Path,
    manifest: &Manifest,
    catalog: &Catalog,
) -> Result<[u64; 3]> {
    catalog.committed_lengths(manifest).ok_or_else(|| {
        IndexError::damaged(
            dir,
            &IndexFile::Catalog.path(dir),
            format!("{} rows cannot be addressed", catalog.rows),
        )
    })
}

/// Checks that a data file of the index in `dir` holds the `committed` bytes the catalog counts
/// on: a crash may leave more, never less.
pub(crate) fn check_committed(dir: &Path, file: &fs_err::File, committed: u64) -> Result<()> {
    let path = file.path();
    let actual = file.metadata().map_err(io_error(path))?.len();
    if actual < committed {
        return Err(IndexError::damaged(
            dir,
            path,
            format!("{actual} bytes, but {committed} were committed"),
        ));
    }
    Ok(())
}

/// A data file holding `committed` bytes; `None` when nothing is committed (a new index's
/// writer has not created it yet).
fn map_committed(
    dir: &Path,
    path: &Path,
    committed: u64,
    opened: &mut MappedFiles,
) -> Result<Option<Mmap>> {
    if committed == 0 {
        return Ok(None);
    }
    let file = fs_err::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => IndexError::damaged(dir, path, "it is missing"),
        _ => io_error(path)(e),
    })?;
    check_committed(dir, &file, committed)?;
    let mapped = map(&file)?;
    opened.hold(file, committed);
    Ok(Some(mapped))
}

/// A data file as it is; `None` when it is missing or empty.
fn map_found(path: &Path, opened: &mut MappedFiles) -> Result<Option<Mmap>> {
    let file = match fs_err::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(path)(e)),
    };
    let length = file.metadata().map_err(io_error(path))?.len();
    if length == 0 {
        return Ok(None);
    }
    let mapped = map(&file)?;
    opened.hold(file, length);
    Ok(Some(mapped))
}

fn map(file: &fs_err::File) -> Result<Mmap> {
    // SAFETY: the data files are append-only; their bytes are never rewritten in place (a
    // compaction writes a new generation), so what is mapped stays valid while mapped. A
    // writer cuts off only bytes past the commit, which no reader reads, and it refuses a
    // damaged index, whose files a repair reads.
    #[allow(unsafe_code)]
    let map = unsafe { Mmap::map(file.file()) }.map_err(io_error(file.path()))?;
    Ok(map)
}
