//! tantivy's folder as SCAR opens it: files it writes follow the umask like every other file of
//! the index, and a reader takes no lock, so a shared or read-only index can be searched.
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

use super::format::{TextFields, text_dir};
use crate::{IndexError, Result};

/// What the process does with the text index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Searches it: no lock, nothing written.
    Read,
    /// Writes it, under tantivy's locks.
    Write,
}

/// The text index of the index folder `dir`.
pub(crate) fn open_text(dir: &Path, access: Access) -> Result<tantivy::Index> {
    let folder = TextFolder::open(dir, access)?;
    tantivy::Index::open(folder).map_err(|e| IndexError::text(dir, e))
}

/// Creates the (empty) text index of the index folder `dir`.
pub(crate) fn create_text(dir: &Path) -> Result<tantivy::Index> {
    let folder = TextFolder::open(dir, Access::Write)?;
    let (schema, _) = TextFields::schema();
    tantivy::Index::create(folder, schema, tantivy::IndexSettings::default())
        .map_err(|e| IndexError::text(dir, e))
}

#[derive(Debug, Clone)]
struct TextFolder {
    inner: MmapDirectory,
    path: PathBuf,
    access: Access,
}

impl TextFolder {
    fn open(dir: &Path, access: Access) -> Result<Self> {
        let path = text_dir(dir);
        let inner = MmapDirectory::open(&path)
            .map_err(|e| IndexError::text(dir, tantivy::TantivyError::from(e)))?;
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
        let mut name = target.file_name().unwrap_or_default().to_os_string();
        name.push(".tmp");
        let temporary = target.with_file_name(name);
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
