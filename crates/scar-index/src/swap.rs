//! A rebuilt index takes the place of the old one by two renames: the old folder moves aside,
//! the rebuild takes its name, and the old folder is removed. A process killed between any two
//! steps leaves the folders in a state [`finish_interrupted_swap`] recognises and completes, so
//! the next writer puts an index back at the path and nothing is lost.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::io_error;
use crate::folder::is_index;
use crate::{IndexError, Result};

/// The folder beside `dir` that a rebuild of `dir` is written into.
#[must_use]
pub fn rebuild_dir(dir: &Path) -> PathBuf {
    beside(dir, ".scar-rebuild")
}

/// Where the old index waits while the rebuild takes its name.
fn replaced_dir(dir: &Path) -> PathBuf {
    beside(dir, ".scar-replaced")
}

/// `dir` with `suffix` added to its name: names no one else gives a folder, so that what is
/// moved or removed here is only ever what a swap put there.
fn beside(dir: &Path, suffix: &str) -> PathBuf {
    let mut name: OsString = dir.file_name().unwrap_or_default().to_owned();
    name.push(suffix);
    dir.with_file_name(name)
}

/// Puts the finished rebuild in [`rebuild_dir`] in the place of the index in `dir`.
pub fn replace_with_rebuild(dir: &Path) -> Result<()> {
    let (rebuilt, replaced) = (rebuild_dir(dir), replaced_dir(dir));
    if !is_index(&rebuilt) {
        return Err(IndexError::NotAnIndex(rebuilt));
    }
    finish_interrupted_swap(dir)?;
    std::fs::rename(dir, &replaced).map_err(io_error(dir))?;
    std::fs::rename(&rebuilt, dir).map_err(io_error(&rebuilt))?;
    std::fs::remove_dir_all(&replaced).map_err(io_error(&replaced))
}

/// What [`finish_interrupted_swap`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptedSwap {
    /// The rebuild had taken the index's name: the old index was removed.
    OldRemoved,
    /// The old index had moved aside, the rebuild not yet in its place: the rebuild was put
    /// there.
    RebuildPlaced,
    /// The old index had moved aside and the rebuild was not whole: the old index was put
    /// back.
    OldRestored,
}

impl std::fmt::Display for InterruptedSwap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::OldRemoved => "the rebuilt index was in place; the old one is now removed",
            Self::RebuildPlaced => "the rebuilt index is now in place of the old one",
            Self::OldRestored => "the rebuild was not whole; the old index is back in place",
        })
    }
}

/// Completes a swap of `dir` that a killed process left half done, saying what it did; `None`
/// when there was none. Writers call it before they touch `dir`.
pub fn finish_interrupted_swap(dir: &Path) -> Result<Option<InterruptedSwap>> {
    let (rebuilt, replaced) = (rebuild_dir(dir), replaced_dir(dir));
    if !replaced.exists() {
        return Ok(None);
    }
    let done = if dir.exists() {
        InterruptedSwap::OldRemoved
    } else if is_index(&rebuilt) {
        std::fs::rename(&rebuilt, dir).map_err(io_error(&rebuilt))?;
        InterruptedSwap::RebuildPlaced
    } else {
        std::fs::rename(&replaced, dir).map_err(io_error(&replaced))?;
        return Ok(Some(InterruptedSwap::OldRestored));
    };
    std::fs::remove_dir_all(&replaced).map_err(io_error(&replaced))?;
    Ok(Some(done))
}

/// The error for opening `dir` where a swap was interrupted before the rebuild took its name.
pub(crate) fn interrupted_swap_error(dir: &Path) -> Option<IndexError> {
    (!dir.exists() && replaced_dir(dir).exists())
        .then(|| IndexError::SwapInterrupted(dir.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::folder::IndexFile;

    /// A folder that [`is_index`] takes for an index, marked with `name`.
    fn fake_index(dir: &Path, name: &str) {
        std::fs::create_dir_all(IndexFile::Text.path(dir)).unwrap();
        std::fs::write(IndexFile::Manifest.path(dir), name).unwrap();
    }

    fn marker(dir: &Path) -> String {
        std::fs::read_to_string(IndexFile::Manifest.path(dir)).unwrap()
    }

    #[test]
    fn a_swap_puts_the_rebuild_in_place_and_removes_the_old_index() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("index");
        fake_index(&dir, "old");
        fake_index(&rebuild_dir(&dir), "new");
        replace_with_rebuild(&dir).unwrap();
        assert_eq!(marker(&dir), "new");
        let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    /// The folders as a kill leaves them, and what the next writer must do.
    struct Kill {
        after: &'static str,
        index: Option<&'static str>,
        replaced: bool,
        rebuild: bool,
        expected: Option<InterruptedSwap>,
    }

    #[test]
    fn a_swap_killed_at_any_step_is_finished_by_the_next_writer() {
        let kills = [
            Kill {
                after: "nothing moved",
                index: Some("old"),
                replaced: false,
                rebuild: true,
                expected: None,
            },
            Kill {
                after: "the old index moved aside",
                index: None,
                replaced: true,
                rebuild: true,
                expected: Some(InterruptedSwap::RebuildPlaced),
            },
            Kill {
                after: "the rebuild took its name",
                index: Some("new"),
                replaced: true,
                rebuild: false,
                expected: Some(InterruptedSwap::OldRemoved),
            },
        ];
        for kill in kills {
            let root = tempfile::tempdir().unwrap();
            let dir = root.path().join("index");
            if let Some(name) = kill.index {
                fake_index(&dir, name);
            }
            if kill.replaced {
                fake_index(&replaced_dir(&dir), "old");
            }
            if kill.rebuild {
                fake_index(&rebuild_dir(&dir), "new");
            }
            let after = kill.after;
            let opens = interrupted_swap_error(&dir).is_none();
            assert_eq!(opens, kill.index.is_some(), "after {after}");
            assert_eq!(
                finish_interrupted_swap(&dir).unwrap(),
                kill.expected,
                "after {after}"
            );
            let at_path = if kill.replaced { "new" } else { "old" };
            assert_eq!(marker(&dir), at_path, "after {after}");
            assert!(!replaced_dir(&dir).exists(), "after {after}");
            assert_eq!(
                finish_interrupted_swap(&dir).unwrap(),
                None,
                "after {after}: once"
            );
        }
    }

    #[test]
    fn an_old_index_moved_aside_without_a_whole_rebuild_comes_back() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("index");
        fake_index(&replaced_dir(&dir), "old");
        std::fs::create_dir_all(rebuild_dir(&dir)).unwrap();
        assert_eq!(
            finish_interrupted_swap(&dir).unwrap(),
            Some(InterruptedSwap::OldRestored)
        );
        assert_eq!(marker(&dir), "old");
    }

    #[test]
    fn only_a_whole_rebuild_replaces_an_index() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("index");
        fake_index(&dir, "old");
        std::fs::create_dir_all(rebuild_dir(&dir)).unwrap();
        assert!(replace_with_rebuild(&dir).is_err());
        assert_eq!(marker(&dir), "old");
    }
}
