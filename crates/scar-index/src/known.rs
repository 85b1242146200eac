//! Vectors already embedded, found again instead of embedded twice: those an interrupted run
//! left in the index's resume journal, and, for a repair, the sound rows of the index being
//! repaired. Each is keyed by the blake3 of the exact text the model embedded, so a vector is
//! only ever reused for the same input to the same model.
//!
//! ```text
//! resume.journal   entries of [key: 32 bytes][check: 8 bytes][vector: dimension × f32 LE]
//! ```
//!
//! The journal holds what the current run embedded for documents it has not committed yet: a
//! kill or a cancel between two commits keeps that work for the next run. It is not part of the
//! committed state: a torn or damaged entry is skipped (its check fails), and the file is
//! deleted when a run completes.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::io_error;
use crate::folder::IndexFile;
use crate::store::{DataFiles, Manifest, VectorEncoding, widen};
use crate::{IndexError, Result};

/// What identifies a chunk's vector: blake3 of the text the model embedded.
pub(crate) type Key = [u8; 32];

/// The key of `text`, the exact input to the model.
pub(crate) fn key(text: &str) -> Key {
    *blake3::hash(text.as_bytes()).as_bytes()
}

/// A vector is kept only if it is finite and of unit length, as every stored vector is.
fn is_sound(vector: &[f32]) -> bool {
    let length = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    vector.iter().all(|x| x.is_finite()) && (length - 1.0).abs() <= 1e-2
}

/// Where a known vector is.
enum Found {
    /// In memory (read from the journal).
    Loaded(Box<[f32]>),
    /// Row `row` of `generations[files]`.
    Stored { files: usize, row: usize },
}

/// Vectors of one model, by [`Key`].
#[derive(Default)]
pub(crate) struct KnownVectors {
    dimension: usize,
    found: HashMap<Key, Found>,
    /// The data files of every generation of an index being rebuilt.
    generations: Vec<DataFiles>,
}

impl std::fmt::Debug for KnownVectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnownVectors")
            .field("dimension", &self.dimension)
            .field("vectors", &self.found.len())
            .finish_non_exhaustive()
    }
}

impl KnownVectors {
    /// None yet, of `dimension` dimensions.
    pub(crate) fn new(dimension: usize) -> Self {
        Self {
            dimension,
            ..Self::default()
        }
    }

    /// How many vectors are known.
    pub(crate) fn len(&self) -> usize {
        self.found.len()
    }

    /// The dimension of the vectors.
    pub(crate) fn dimension(&self) -> usize {
        self.dimension
    }

    /// The vector for `key`, if known.
    pub(crate) fn get(&self, key: &Key) -> Option<Vec<f32>> {
        match self.found.get(key)? {
            Found::Loaded(vector) => Some(vector.to_vec()),
            Found::Stored { files, row } => self.generations[*files].vector(*row, self.dimension),
        }
    }

    /// Adds the journal's entries that are intact and of this dimension.
    pub(crate) fn add_journal(&mut self, dir: &Path) -> Result<()> {
        let path = IndexFile::Journal.path(dir);
        let bytes = match fs_err::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_error(&path)(e)),
        };
        let size = entry_bytes(self.dimension);
        for entry in bytes.chunks_exact(size) {
            let (key, rest) = entry.split_at(32);
            let (check, vector) = rest.split_at(8);
            if check != entry_check(key, vector) {
                continue;
            }
            let vector = widen(vector, VectorEncoding::F32);
            if is_sound(&vector) {
                let key: Key = key.try_into().unwrap_or_default();
                self.found.insert(key, Found::Loaded(vector.into()));
            }
        }
        Ok(())
    }

    /// Adds every sound row of every generation of data files in the index folder `dir`,
    /// written as `manifest` says: a record whose text can be read, a vector that is finite and
    /// of unit length, and `trusted(generation, row)`. The catalog is not needed, so this works
    /// when it is lost.
    pub(crate) fn add_rows(
        &mut self,
        dir: &Path,
        manifest: &Manifest,
        trusted: &dyn Fn(u64, u32) -> bool,
    ) -> Result<()> {
        let mut generations: Vec<u64> = IndexFile::data_files_in(dir)?
            .into_iter()
            .filter_map(|file| match file {
                IndexFile::Vectors(generation) => Some(generation),
                _ => None,
            })
            .collect();
        generations.sort_unstable();
        for generation in generations {
            let files = DataFiles::open_found(dir, generation, manifest.vectors)?;
            let index = self.generations.len();
            for row in 0..files.rows(self.dimension) {
                if !trusted(generation, row as u32) {
                    continue;
                }
                let Some(record) = files.record(row) else {
                    continue;
                };
                let Ok((text, heading)) = files.strings_of(&record) else {
                    continue;
                };
                if !files
                    .vector(row, self.dimension)
                    .is_some_and(|v| is_sound(&v))
                {
                    continue;
                }
                let embedded =
                    crate::chunk::embedding_text(heading, text, manifest.chunker.prepend_headings);
                self.found
                    .insert(key(&embedded), Found::Stored { files: index, row });
            }
            self.generations.push(files);
        }
        Ok(())
    }
}

fn entry_bytes(dimension: usize) -> usize {
    32 + 8 + dimension * 4
}

fn entry_check(key: &[u8], vector: &[u8]) -> [u8; 8] {
    let mut hasher = blake3::Hasher::new();
    hasher.update(key);
    hasher.update(vector);
    let mut check = [0; 8];
    check.copy_from_slice(&hasher.finalize().as_bytes()[..8]);
    check
}

/// The write side of the resume journal: entries are appended as they are made durable.
pub(crate) struct Journal {
    path: PathBuf,
    file: Option<fs_err::File>,
}

impl Journal {
    /// The journal of the index folder `dir`; nothing is written until [`Journal::append`].
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            path: IndexFile::Journal.path(dir),
            file: None,
        }
    }

    /// Appends the entries and makes them durable.
    pub(crate) fn append<'a>(
        &mut self,
        entries: impl IntoIterator<Item = (&'a Key, &'a [f32])>,
    ) -> Result<()> {
        let mut bytes = Vec::new();
        for (key, vector) in entries {
            let start = bytes.len();
            bytes.extend_from_slice(key);
            bytes.extend_from_slice(&[0; 8]);
            for x in vector {
                bytes.extend(x.to_le_bytes());
            }
            let check = entry_check(key, &bytes[start + 40..]);
            bytes[start + 32..start + 40].copy_from_slice(&check);
        }
        if bytes.is_empty() {
            return Ok(());
        }
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(
                fs_err::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)
                    .map_err(io_error(&self.path))?,
            ),
        };
        file.write_all(&bytes).map_err(io_error(&self.path))?;
        file.sync_data().map_err(io_error(&self.path))
    }

    /// Deletes the journal: everything it held is committed.
    pub(crate) fn remove(mut self) -> Result<()> {
        self.file = None;
        match fs_err::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(IndexError::Io {
                path: self.path.clone(),
                source: e,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(dimension: usize, hot: usize) -> Vec<f32> {
        let mut v = vec![0.0; dimension];
        v[hot] = 1.0;
        v
    }

    #[test]
    fn the_journal_gives_back_what_it_was_given_and_skips_damaged_entries() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (key("a"), key("b"), key("c"));
        let mut journal = Journal::new(dir.path());
        journal
            .append([(&a, &unit(4, 0)[..]), (&b, &unit(4, 1)[..])])
            .unwrap();
        journal.append([(&c, &unit(4, 2)[..])]).unwrap();
        // Damage the second entry's vector and tear the third.
        let path = IndexFile::Journal.path(dir.path());
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[entry_bytes(4) + 45] ^= 0x40;
        bytes.truncate(bytes.len() - 3);
        std::fs::write(&path, bytes).unwrap();

        let mut known = KnownVectors::new(4);
        known.add_journal(dir.path()).unwrap();
        assert_eq!(known.len(), 1);
        assert_eq!(known.get(&a), Some(unit(4, 0)));
        assert_eq!((known.get(&b), known.get(&c)), (None, None));
        journal.remove().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn vectors_that_are_not_finite_unit_vectors_are_not_sound() {
        assert!(is_sound(&[0.6, 0.8]));
        assert!(!is_sound(&[0.6, 0.9]));
        assert!(!is_sound(&[f32::NAN, 1.0]));
        assert!(!is_sound(&[0.0, 0.0]));
    }

    #[test]
    fn a_missing_journal_adds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut known = KnownVectors::new(4);
        known.add_journal(dir.path()).unwrap();
        assert_eq!(known.len(), 0);
    }
}
