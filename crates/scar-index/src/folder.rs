//! The index folder: every file an index keeps in it, named in one place.
//!
//! ```text
//! manifest.json          model, chunker, vector encoding, format version (written once)
//! text/                  tantivy: BM25 over chunk text; its meta.json holds the catalog
//! vectors.<gen>.bin      one embedding per row, f32 or f16, rows of a document contiguous
//! chunks.<gen>.bin       one fixed-size record per row (position, ranges, continuity, ...)
//! strings.<gen>.bin      chunk texts and heading paths, UTF-8, addressed from the records
//! hnsw.usearch           the HNSW graph, when the index has one
//! hnsw.json              what the graph covers, its parameters and checksum
//! resume.journal         vectors embedded for documents not committed yet
//! skipped.json           the files the runs could not index, and why
//! quarantine.json        the files that stopped a run, skipped until they change
//! reading.json           the file being read, while it is (names the file if the run dies)
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use crate::Result;
use crate::error::io_error;

/// A file (or folder) of an index, as tantivy's `SegmentComponent` names a segment's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IndexFile {
    /// What the index was built with.
    Manifest,
    /// tantivy's folder: the chunk texts, for BM25.
    Text,
    /// tantivy's commit metadata, in the text folder: its payload is the catalog.
    Catalog,
    /// tantivy's list of the files it manages, in the text folder.
    TextFileList,
    /// A generation's embeddings.
    Vectors(u64),
    /// A generation's chunk records.
    Records(u64),
    /// A generation's chunk texts and heading paths.
    Strings(u64),
    /// The HNSW graph.
    HnswGraph,
    /// What the HNSW graph covers.
    HnswStamp,
    /// The resume journal: vectors embedded for documents not committed yet.
    Journal,
    /// The files the index could not read, and why.
    SkipList,
    /// The files that stopped a run, skipped until they change.
    Quarantine,
    /// The file an indexing run is reading, while it reads it.
    Reading,
}

impl IndexFile {
    /// The three data files of a generation: vectors, records, strings.
    pub(crate) fn data(generation: u64) -> [Self; 3] {
        [
            Self::Vectors(generation),
            Self::Records(generation),
            Self::Strings(generation),
        ]
    }

    /// The paths of the three data files of a generation in the index folder `dir`.
    pub(crate) fn data_paths(dir: &Path, generation: u64) -> [PathBuf; 3] {
        Self::data(generation).map(|file| file.path(dir))
    }

    /// Its path in the index folder `dir`.
    pub(crate) fn path(self, dir: &Path) -> PathBuf {
        match self {
            Self::Catalog | Self::TextFileList => Self::Text.path(dir).join(self.to_string()),
            _ => dir.join(self.to_string()),
        }
    }

    /// The generation of a data file; `None` for the other files.
    pub(crate) fn generation(self) -> Option<u64> {
        match self {
            Self::Vectors(generation) | Self::Records(generation) | Self::Strings(generation) => {
                Some(generation)
            }
            _ => None,
        }
    }

    /// The data file called `name`, if it is one.
    fn data_file(name: &str) -> Option<Self> {
        let (kind, rest) = name.split_once('.')?;
        let generation = rest.strip_suffix(".bin")?.parse().ok()?;
        let [vectors, records, strings] = Self::data(generation);
        match kind {
            "vectors" => Some(vectors),
            "chunks" => Some(records),
            "strings" => Some(strings),
            _ => None,
        }
    }

    /// The data files of every generation in the index folder `dir`.
    pub(crate) fn data_files_in(dir: &Path) -> Result<Vec<Self>> {
        Ok(fs_err::read_dir(dir)
            .map_err(io_error(dir))?
            .flatten()
            .filter_map(|entry| Self::data_file(entry.file_name().to_str()?))
            .collect())
    }
}

impl fmt::Display for IndexFile {
    /// Its name in its folder.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Manifest => f.write_str("manifest.json"),
            Self::Text => f.write_str("text"),
            Self::Catalog => f.write_str("meta.json"),
            Self::TextFileList => f.write_str(".managed.json"),
            Self::Vectors(generation) => write!(f, "vectors.{generation}.bin"),
            Self::Records(generation) => write!(f, "chunks.{generation}.bin"),
            Self::Strings(generation) => write!(f, "strings.{generation}.bin"),
            Self::HnswGraph => f.write_str("hnsw.usearch"),
            Self::HnswStamp => f.write_str("hnsw.json"),
            Self::Journal => f.write_str("resume.journal"),
            Self::SkipList => f.write_str("skipped.json"),
            Self::Quarantine => f.write_str("quarantine.json"),
            Self::Reading => f.write_str("reading.json"),
        }
    }
}

/// True when `dir` looks like a SCAR index: its manifest beside its text folder. A cheap test
/// of two paths, for telling an index from a folder of documents; [`Index::open`] checks it.
///
/// [`Index::open`]: crate::Index::open
#[must_use]
pub fn is_index(dir: &Path) -> bool {
    IndexFile::Manifest.path(dir).is_file() && IndexFile::Text.path(dir).is_dir()
}

/// Where `path` is written before it is renamed into place: beside it, `.tmp` added.
pub(crate) fn temporary_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Writes `path` through a temporary file and a rename, so that it is never seen half written.
pub(crate) fn write_replacing(path: &Path, contents: impl AsRef<[u8]>) -> Result<()> {
    let temporary = temporary_path(path);
    fs_err::write(&temporary, contents).map_err(io_error(&temporary))?;
    fs_err::rename(&temporary, path).map_err(io_error(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_files_are_found_by_name_and_nothing_else_is() {
        for file in [1, 17].into_iter().flat_map(IndexFile::data) {
            assert_eq!(IndexFile::data_file(&file.to_string()), Some(file));
        }
        for name in [
            "vectors.bin",
            "chunks.x.bin",
            "notes.3.bin",
            "strings.2.tmp",
        ] {
            assert_eq!(IndexFile::data_file(name), None, "{name}");
        }
        assert_eq!(
            IndexFile::Catalog.path(Path::new("/i")),
            Path::new("/i/text/meta.json")
        );
        assert_eq!(
            temporary_path(&IndexFile::HnswGraph.path(Path::new("/i"))),
            Path::new("/i/hnsw.usearch.tmp")
        );
    }
}
