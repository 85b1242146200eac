//! Keeping the library current: the folders indexed into each library entry are watched while
//! the app runs, and a burst of changes under them starts an indexing run of that entry (one
//! run at a time; entries that changed meanwhile wait their turn).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::ScarApp;

/// A watch over one entry's sources, stopped when the entry goes or its sources change.
pub(crate) struct Watch {
    sources: Vec<PathBuf>,
    stop: Arc<AtomicBool>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl ScarApp {
    /// Starts a watch for each entry with sources that has none, and drops the watches of
    /// entries that are gone or whose sources changed.
    pub(crate) fn keep_watching(&mut self, ctx: &egui::Context) {
        let library = &self.settings.library;
        self.watches.retain(|dir, watch| {
            library
                .iter()
                .any(|entry| &entry.dir == dir && entry.sources == watch.sources)
        });
        for entry in library.iter().filter(|entry| !entry.sources.is_empty()) {
            if self.watches.contains_key(&entry.dir) {
                continue;
            }
            let stop = Arc::new(AtomicBool::new(false));
            self.worker.watch(
                ctx,
                entry.dir.clone(),
                entry.sources.clone(),
                Arc::clone(&stop),
            );
            let watch = Watch {
                sources: entry.sources.clone(),
                stop,
            };
            self.watches.insert(entry.dir.clone(), watch);
        }
    }

    /// Files under `dir`'s sources changed: it is indexed when no other run is going.
    pub(crate) fn sources_changed(&mut self, dir: PathBuf) {
        if !self.stale.contains(&dir) {
            self.stale.push(dir);
        }
    }

    /// Starts the next run for an entry whose files changed, if none is running.
    pub(crate) fn index_stale(&mut self, ctx: &egui::Context) {
        if self.indexing.is_some() || self.stale.is_empty() {
            return;
        }
        let dir = self.stale.remove(0);
        let Some(entry) = self.settings.library.iter().find(|e| e.dir == dir) else {
            return;
        };
        let sources = entry.sources.clone();
        self.start_indexing(ctx, dir, sources);
        if let Some(indexing) = &mut self.indexing {
            indexing.automatic = true;
        }
    }
}
