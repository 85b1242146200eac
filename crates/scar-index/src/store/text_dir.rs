//! tantivy's folder as SCAR opens it: files it writes follow the umask like every other file of
//! the index, and a reader takes no lock, so a shared or read-only index can be searched. Its
//! commit's payload is the catalog, read here.
//!
//! tantivy's own folder writes `meta.json` and `.managed.json` through temporary files created
//! 0600 (only their owner may read them), and its reader takes a file lock, which needs write
//! access to the folder.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, WatchCallback, WatchHandle, WritePtr,
};

use super::data::MappedFiles;
use super::format::{Catalog, TextFields};
use crate::error::io_error;
use crate::folder::{IndexFile, temporary_path};
use crate::{Analyzer, IndexError, Result};

/// What the process does with the text index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Searches it: no lock, nothing written.
    Read,
    /// Writes it, under tantivy's locks.
    Write,
}

/// The text index of the index folder `dir`. Its JSON files are parsed first, so that a
/// damaged one is named.
pub(crate) fn open_text(dir: &Path, access: Access) -> Result<tantivy::Index> {
    for (file, required) in [(IndexFile::Catalog, true), (IndexFile::TextFileList, false)] {
        let path = file.path(dir);
        match fs_err::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice::<serde::de::IgnoredAny>(&bytes)
                    .map_err(|e| IndexError::unparsable(dir, &path, "unreadable JSON", e))?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound && !required => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(IndexError::damaged(dir, &path, "it is missing"));
            }
            Err(e) => return Err(io_error(&path)(e)),
        }
    }
    let folder = TextFolder::open(dir, access)?;
    let index = tantivy::Index::open(folder).map_err(|e| read_error(dir, e))?;
    register_analyzers(&index);
    Ok(index)
}

/// Makes every analyzer an index may name known to tantivy's `index`.
fn register_analyzers(index: &tantivy::Index) {
    let analyzer = Analyzer::Multilingual;
    index
        .tokenizers()
        .register(analyzer.tantivy_name(), analyzer.text_analyzer());
}

/// Checks what the text index holds before anything reads it: the schema, and that every file
/// of its segments is there and matches its checksum (tantivy does not check them when it
/// reads, opens a segment's files only when a search needs them, and damaged bytes in a term
/// dictionary or posting list can make it panic). Each file checked is held in `mapped`, since
/// tantivy maps them.
pub(crate) fn check_text(
    dir: &Path,
    index: &tantivy::Index,
    analyzer: Analyzer,
    mapped: &mut MappedFiles,
) -> Result<()> {
    use tantivy::index::SegmentComponent as Component;

    let (schema, _) = TextFields::schema(analyzer);
    if index.schema() != schema {
        return Err(IndexError::damaged(
            dir,
            &IndexFile::Catalog.path(dir),
            "its schema is not the one SCAR writes",
        ));
    }
    let metas = index
        .searchable_segment_metas()
        .map_err(|e| read_error(dir, e))?;
    let folder = IndexFile::Text.path(dir);
    for meta in &metas {
        // A segment's deletes are a file per commit: only the committed one is checked, since a
        // writer may be writing the next commit's beside it.
        let deletes = meta.delete_opstamp().map(|_| Component::Delete);
        let components = [
            Component::Postings,
            Component::Positions,
            Component::FastFields,
            Component::FieldNorms,
            Component::Terms,
            Component::Store,
        ];
        for component in components.into_iter().chain(deletes) {
            let relative = meta.relative_path(component);
            let path = folder.join(&relative);
            if !path.is_file() {
                return Err(IndexError::damaged(dir, &path, "it is missing"));
            }
            let sound = index
                .directory()
                .validate_checksum(&relative)
                .map_err(|e| read_error(dir, e.into()))?;
            if !sound {
                return Err(IndexError::damaged(
                    dir,
                    &path,
                    "its checksum does not match its content",
                ));
            }
            mapped.hold_whole(&path)?;
        }
    }
    Ok(())
}

/// The catalog of the index in `dir`, read without checking it against the data files.
pub(crate) fn read_catalog_of(dir: &Path) -> Result<Catalog> {
    let text = open_text(dir, Access::Read)?;
    read_catalog(dir, &text)
}

/// The catalog that the last commit of the text index `tantivy` carries.
pub(crate) fn read_catalog(dir: &Path, tantivy: &tantivy::Index) -> Result<Catalog> {
    let path = IndexFile::Catalog.path(dir);
    let metas = tantivy
        .load_metas()
        .map_err(|e| IndexError::unparsable(dir, &path, "tantivy cannot read it", e))?;
    match metas.payload {
        None => Ok(Catalog::default()),
        Some(payload) => serde_json::from_str(&payload)
            .map_err(|e| IndexError::unparsable(dir, &path, "unreadable commit payload", e)),
    }
}

/// A tantivy error met while reading: damaged data is reported as a damaged file of the index.
pub(crate) fn read_error(dir: &Path, error: tantivy::TantivyError) -> IndexError {
    use tantivy::TantivyError as E;
    use tantivy::directory::error::OpenDirectoryError;

    let folder = IndexFile::Text.path(dir);
    match error {
        E::OpenReadError(OpenReadError::FileDoesNotExist(path)) => {
            IndexError::damaged(dir, &folder.join(path), "it is missing")
        }
        E::OpenReadError(OpenReadError::IncompatibleIndex(incompatibility)) => {
            IndexError::damaged(dir, &folder, format!("{incompatibility:?}"))
        }
        E::OpenReadError(OpenReadError::IoError { io_error, filepath })
            if matches!(
                io_error.kind(),
                io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
            ) =>
        {
            IndexError::damaged(dir, &folder.join(filepath), io_error.to_string())
        }
        E::OpenDirectoryError(OpenDirectoryError::DoesNotExist(_)) => {
            IndexError::damaged(dir, &folder, "it is missing")
        }
        E::DataCorruption(corruption) => {
            // tantivy's message quotes the whole file: its first line is enough.
            let reason = format!("{corruption:?}");
            let reason: String = reason
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(200)
                .collect();
            IndexError::damaged(dir, &folder, reason)
        }
        other => IndexError::text(dir, other),
    }
}

/// Creates the (empty) text index of the index folder `dir`, its text cut by `analyzer`.
pub(crate) fn create_text(dir: &Path, analyzer: Analyzer) -> Result<tantivy::Index> {
    let folder = TextFolder::open(dir, Access::Write)?;
    let (schema, _) = TextFields::schema(analyzer);
    let index = tantivy::Index::create(folder, schema, tantivy::IndexSettings::default())
        .map_err(|e| IndexError::text(dir, e))?;
    register_analyzers(&index);
    Ok(index)
}

#[derive(Debug, Clone)]
struct TextFolder {
    inner: MmapDirectory,
    path: PathBuf,
    access: Access,
}

impl TextFolder {
    fn open(dir: &Path, access: Access) -> Result<Self> {
        let path = IndexFile::Text.path(dir);
        let inner = MmapDirectory::open(&path)
            .map_err(|e| read_error(dir, tantivy::TantivyError::from(e)))?;
        Ok(Self {
            inner,
            path,
            access,
        })
    }
}

impl Directory for TextFolder {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        self.inner.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.inner.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.inner.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        self.inner.open_write(path)
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.inner.atomic_read(path)
    }

    /// Through a temporary file beside the target and a rename, as tantivy does, but created
    /// with the process's umask.
    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let target = self.path.join(path);
        let temporary = temporary_path(&target);
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(data)?;
        file.sync_data()?;
        std::fs::rename(&temporary, &target)
    }

    fn sync_directory(&self) -> io::Result<()> {
        self.inner.sync_directory()
    }

    /// A reader takes no lock. tantivy's lock only keeps a writer's garbage collection from
    /// deleting segments while a reader opens them: a search racing a commit can then fail on a
    /// missing file (and can be run again), but never reads wrong data.
    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        match self.access {
            Access::Read => Ok(DirectoryLock::from(Box::new(()))),
            Access::Write => self.inner.acquire_lock(lock),
        }
    }

    fn watch(&self, callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.inner.watch(callback)
    }
}
