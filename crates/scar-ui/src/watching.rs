//! Keeping the library current: the folders indexed into each library entry are watched while
//! the app runs, and a burst of changes under them queues that entry for an indexing run (one
//! run at a time; entries that changed meanwhile wait their turn).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::LibraryEntry;
use crate::worker::Worker;

/// A watch over one entry's sources, stopped when the entry goes or its sources change.
struct Watch {
    sources: Vec<PathBuf>,
    stop: Arc<AtomicBool>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The watches over the library's sources, and the entries whose files changed.
#[derive(Default)]
pub(crate) struct Watches {
    /// By index folder.
    watches: HashMap<PathBuf, Watch>,
    /// Entries whose files changed, waiting for an indexing run.
    stale: Vec<PathBuf>,
}

impl Watches {
    /// Starts a watch for each entry of `library` with sources that has none, and drops the
    /// watches of entries that are gone or whose sources changed.
    pub fn keep_watching(
        &mut self,
        ctx: &egui::Context,
        worker: &Worker,
        library: &[LibraryEntry],
    ) {
        self.watches.retain(|dir, watch| {
            library.iter().any(|entry| {
                entry.location.folder() == Some(dir.as_path()) && entry.sources == watch.sources
            })
        });
        // Only folders the app indexed have sources to watch.
        for entry in library.iter().filter(|entry| !entry.sources.is_empty()) {
            let Some(dir) = entry.location.folder() else {
                continue;
            };
            if self.watches.contains_key(dir) {
                continue;
            }
            let stop = Arc::new(AtomicBool::new(false));
            worker.watch(
                ctx,
                dir.to_owned(),
                entry.sources.clone(),
                Arc::clone(&stop),
            );
            let watch = Watch {
                sources: entry.sources.clone(),
                stop,
            };
            self.watches.insert(dir.to_owned(), watch);
        }
    }

    /// Files under `dir`'s sources changed: it waits for its indexing run.
    pub fn sources_changed(&mut self, dir: PathBuf) {
        if !self.stale.contains(&dir) {
            self.stale.push(dir);
        }
    }

    /// The entry that has waited longest for a run.
    pub fn next_stale(&mut self) -> Option<PathBuf> {
        (!self.stale.is_empty()).then(|| self.stale.remove(0))
    }
}
