//! Watching the files and folders an index holds: file-system events gathered into bursts, so
//! that a save, an editor's save-by-rename or a thousand copied files cost one indexing run.
//!
//! A watched folder that is deleted or renamed takes its watch with it: the watch notices, ends
//! a burst that names it (so that a run drops its documents), and watches for it to come back.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use crate::error::{IndexError, Result};

/// How long the files must stay quiet before a burst ends.
const QUIET: Duration = Duration::from_millis(400);
/// The longest a burst lasts while changes keep coming, so that a folder written to without
/// pause is still indexed now and then.
const LONGEST_BURST: Duration = Duration::from_secs(10);
/// How often a wait checks whether it was cancelled.
const CANCEL_POLL: Duration = Duration::from_millis(200);

/// A watch over the roots of an index, which reports changes in bursts.
pub struct FolderWatch {
    // Kept alive: dropping the watcher ends the events.
    watcher: RecommendedWatcher,
    events: Receiver<notify::Result<Event>>,
    roots: Vec<WatchedRoot>,
    index: PathBuf,
}

/// A root and what is watched for it: the folder itself, or a file's folder.
struct WatchedRoot {
    path: PathBuf,
    target: PathBuf,
    mode: RecursiveMode,
    /// The target's identity while it is watched; `None` while it is gone.
    identity: Option<Identity>,
}

/// The file-system object a path names, so that a folder deleted and made again between two
/// looks is told from the one that was watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    device: u64,
    inode: u64,
}

impl Identity {
    fn of(path: &Path) -> Option<Self> {
        let metadata = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Some(Self {
                device: metadata.dev(),
                inode: metadata.ino(),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = metadata;
            Some(Self {
                device: 0,
                inode: 0,
            })
        }
    }
}

/// The files one burst of changes touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Burst {
    /// Every path an event named, sorted, each once: new, changed, renamed and removed files.
    pub paths: Vec<PathBuf>,
    /// How many file-system events the burst gathered.
    pub events: usize,
    /// Roots that were deleted or renamed away: their documents go at the next run, and the
    /// watch waits for them to come back.
    pub gone: Vec<PathBuf>,
    /// Roots that came back, watched again.
    pub back: Vec<PathBuf>,
}

impl FolderWatch {
    /// Watches `roots` (folders recursively; a file through its folder, so that a file replaced
    /// by a rename is still seen), leaving out the index folder `index` itself, whose own
    /// commits would otherwise wake the watch after every run.
    pub fn new(roots: &[PathBuf], index: &Path) -> Result<Self> {
        let (sender, events) = mpsc::channel();
        let mut watcher =
            notify::recommended_watcher(sender).map_err(|source| IndexError::Watch {
                path: roots.first().cloned().unwrap_or_default(),
                source,
            })?;
        let mut roots_watched = Vec::new();
        for root in roots {
            let canonical = root.canonicalize().map_err(|source| IndexError::Io {
                path: root.clone(),
                source,
            })?;
            let (target, mode) = if canonical.is_dir() {
                (canonical.clone(), RecursiveMode::Recursive)
            } else {
                let folder = canonical.parent().unwrap_or(&canonical).to_owned();
                (folder, RecursiveMode::NonRecursive)
            };
            watcher
                .watch(&target, mode)
                .map_err(|source| IndexError::Watch {
                    path: target.clone(),
                    source,
                })?;
            roots_watched.push(WatchedRoot {
                identity: Identity::of(&target),
                path: canonical,
                target,
                mode,
            });
        }
        Ok(Self {
            watcher,
            events,
            roots: roots_watched,
            index: index.canonicalize().unwrap_or_else(|_| index.to_owned()),
        })
    }

    /// Looks at each root's folder: one gone (or replaced) is marked so, one back is watched
    /// again. Returns the roots gone and back since the last look.
    fn check_roots(&mut self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let (mut gone, mut back) = (Vec::new(), Vec::new());
        for root in &mut self.roots {
            let now = Identity::of(&root.target);
            if now == root.identity {
                continue;
            }
            if root.identity.is_some() {
                // Its watch ended with it (or follows it elsewhere): stop it, if anything is
                // left to stop.
                let _ = self.watcher.unwatch(&root.target);
                root.identity = None;
                gone.push(root.path.clone());
            }
            if now.is_some() && self.watcher.watch(&root.target, root.mode).is_ok() {
                root.identity = now;
                back.push(root.path.clone());
            }
        }
        (gone, back)
    }

    /// Waits for the next burst: the first change to a file under the roots, and every change
    /// after it until the files have been quiet for 0.4 s (or 10 s have passed); a root that
    /// goes or comes back is a change too. `None` once `cancel` is set, or when the watch has
    /// stopped.
    pub fn next_burst(&mut self, cancel: &AtomicBool) -> Option<Burst> {
        let mut paths = BTreeSet::new();
        let mut events = 0;
        let mut started: Option<Instant> = None;
        let (mut all_gone, mut all_back) = (Vec::new(), Vec::new());
        loop {
            if cancel.load(Ordering::SeqCst) {
                return None;
            }
            let (gone, back) = self.check_roots();
            if !gone.is_empty() || !back.is_empty() {
                paths.extend(gone.iter().chain(&back).cloned());
                all_gone.extend(gone);
                all_back.extend(back);
                started.get_or_insert_with(Instant::now);
            }
            let wait = match started {
                None => CANCEL_POLL,
                Some(started) => {
                    if started.elapsed() >= LONGEST_BURST {
                        break;
                    }
                    QUIET.min(LONGEST_BURST.saturating_sub(started.elapsed()))
                }
            };
            match self.events.recv_timeout(wait) {
                Ok(Ok(event)) => {
                    let relevant: Vec<PathBuf> = self.relevant_paths(&event).collect();
                    if !relevant.is_empty() {
                        events += 1;
                        paths.extend(relevant);
                        started.get_or_insert_with(Instant::now);
                    }
                }
                // A lost event (the kernel's queue overflowed) still means something changed.
                Ok(Err(_)) => {
                    events += 1;
                    started.get_or_insert_with(Instant::now);
                }
                Err(RecvTimeoutError::Timeout) if started.is_some() => break,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
        Some(Burst {
            paths: paths.into_iter().collect(),
            events,
            gone: all_gone,
            back: all_back,
        })
    }

    /// The paths of `event` that can change what the index holds: not reads, not the index's
    /// own files, not hidden files, only paths under a root.
    fn relevant_paths<'e>(&'e self, event: &'e Event) -> impl Iterator<Item = PathBuf> + 'e {
        let counts = !matches!(event.kind, EventKind::Access(_));
        event
            .paths
            .iter()
            .filter(move |path| counts && self.is_watched(path))
            .cloned()
    }

    fn is_watched(&self, path: &Path) -> bool {
        let hidden = path
            .file_name()
            .is_some_and(|name| name.as_encoded_bytes().starts_with(b"."));
        !hidden
            && !path.starts_with(&self.index)
            && self.roots.iter().any(|root| path.starts_with(&root.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_thousand_changes_make_one_burst_and_the_index_folder_none() {
        let root = tempfile::tempdir().unwrap();
        let index = root.path().join("index");
        fs::create_dir(&index).unwrap();
        let mut watch = FolderWatch::new(&[root.path().to_owned()], &index).unwrap();
        let cancel = AtomicBool::new(false);

        for i in 0..1000 {
            fs::write(root.path().join(format!("note-{i}.txt")), "words").unwrap();
        }
        fs::write(root.path().join(".hidden.swp"), "x").unwrap();
        let burst = watch.next_burst(&cancel).unwrap();
        assert_eq!(burst.paths.len(), 1000, "{:?}", &burst.paths[..3]);
        assert!(burst.events >= 1000);

        // Writing the index, and reading the files, wake nothing: a rename does.
        fs::write(index.join("manifest.json"), "{}").unwrap();
        let _ = fs::read(root.path().join("note-1.txt")).unwrap();
        fs::rename(
            root.path().join("note-1.txt"),
            root.path().join("renamed.txt"),
        )
        .unwrap();
        let burst = watch.next_burst(&cancel).unwrap();
        let names: Vec<_> = burst.paths.iter().map(|p| p.file_name().unwrap()).collect();
        assert_eq!(names, ["note-1.txt", "renamed.txt"]);
    }

    #[test]
    fn a_watched_file_is_seen_after_a_save_by_rename_and_cancel_ends_the_wait() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("draft.md");
        fs::write(&file, "one").unwrap();
        fs::write(root.path().join("other.md"), "unrelated").unwrap();
        let mut watch =
            FolderWatch::new(std::slice::from_ref(&file), &root.path().join("index")).unwrap();
        let cancel = AtomicBool::new(false);
        // An editor's save: write a temporary file, then rename it over the original.
        let temporary = root.path().join("draft.md.tmp~");
        fs::write(&temporary, "two").unwrap();
        fs::rename(&temporary, &file).unwrap();
        fs::write(root.path().join("other.md"), "still unrelated").unwrap();
        let burst = watch.next_burst(&cancel).unwrap();
        assert_eq!(burst.paths, [file.canonicalize().unwrap()]);

        cancel.store(true, Ordering::SeqCst);
        assert_eq!(watch.next_burst(&cancel), None);
    }

    #[test]
    fn a_folder_deleted_and_made_again_is_reported_and_watched_again() {
        let parent = tempfile::tempdir().unwrap();
        let folder = parent.path().join("notes");
        fs::create_dir(&folder).unwrap();
        let mut watch =
            FolderWatch::new(std::slice::from_ref(&folder), &parent.path().join("index")).unwrap();
        let cancel = AtomicBool::new(false);
        let canonical = folder.canonicalize().unwrap();

        fs::remove_dir(&folder).unwrap();
        let burst = watch.next_burst(&cancel).unwrap();
        assert_eq!(burst.gone, std::slice::from_ref(&canonical));
        assert!(burst.paths.contains(&canonical));

        fs::create_dir(&folder).unwrap();
        let burst = watch.next_burst(&cancel).unwrap();
        assert_eq!(burst.back, std::slice::from_ref(&canonical));

        // Files in the folder made again are seen.
        fs::write(folder.join("new.txt"), "words").unwrap();
        let burst = watch.next_burst(&cancel).unwrap();
        assert_eq!(burst.paths, [canonical.join("new.txt")]);
        assert!(burst.gone.is_empty() && burst.back.is_empty());
    }
}
