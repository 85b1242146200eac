//! The indexing panel: the run in progress with its progress, throughput, ETA and Cancel, and
//! every file the last run could not index. Runs start from the library (adding or updating an
//! entry, a drop on the window) or from a watch over an entry's sources.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use scar_index::{IndexProgress, IndexReport};

use crate::library::files_ui;
use crate::watching::Watches;
use crate::worker::Worker;
use crate::{LibraryEntry, Result, file_name};

/// An indexing run in progress.
struct Run {
    dir: PathBuf,
    progress: IndexProgress,
    cancel: Arc<AtomicBool>,
    /// Started by a watch, not by the user: the current index stays current.
    automatic: bool,
}

/// One indexing run at a time, what the last one did, and the watches that queue runs.
#[derive(Default)]
pub(crate) struct IndexingPanel {
    running: Option<Run>,
    last: Option<(PathBuf, IndexReport)>,
    watches: Watches,
}

impl IndexingPanel {
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Indexes `sources` into `dir` on the worker; `automatic` when a watch asked for it.
    pub fn start(
        &mut self,
        ctx: &egui::Context,
        worker: &Worker,
        dir: PathBuf,
        sources: Vec<PathBuf>,
        automatic: bool,
    ) {
        let cancel = Arc::new(AtomicBool::new(false));
        worker.index(ctx, dir.clone(), sources, Arc::clone(&cancel));
        self.running = Some(Run {
            dir,
            progress: IndexProgress::default(),
            cancel,
            automatic,
        });
    }

    pub fn progress(&mut self, progress: IndexProgress) {
        if let Some(run) = &mut self.running {
            run.progress = progress;
        }
    }

    /// Ends the run into `dir`, keeping its report to show; gives back whether a watch started
    /// it.
    pub fn finished(&mut self, dir: &Path, result: Result<IndexReport>) -> Result<bool> {
        let automatic = self.running.take().is_some_and(|run| run.automatic);
        self.last = Some((dir.to_owned(), result?));
        Ok(automatic)
    }

    /// Watches the sources of each entry of `library` that has some.
    pub fn keep_watching(
        &mut self,
        ctx: &egui::Context,
        worker: &Worker,
        library: &[LibraryEntry],
    ) {
        self.watches.keep_watching(ctx, worker, library);
    }

    /// Files under `dir`'s sources changed: it is indexed when no other run is going.
    pub fn sources_changed(&mut self, dir: PathBuf) {
        self.watches.sources_changed(dir);
    }

    /// The entry of `library` whose files changed, with its sources, once no run is going.
    pub fn next_stale(&mut self, library: &[LibraryEntry]) -> Option<(PathBuf, Vec<PathBuf>)> {
        if self.running.is_some() {
            return None;
        }
        let dir = self.watches.next_stale()?;
        let entry = library
            .iter()
            .find(|e| e.location.folder() == Some(dir.as_path()))?;
        Some((dir, entry.sources.clone()))
    }

    /// The run in progress, with Cancel, and what the last run did.
    pub fn indexing_ui(&self, ui: &mut egui::Ui) {
        if let Some(run) = &self.running {
            ui.separator();
            ui.strong(format!("Indexing into {}", run.dir.display()));
            let progress = &run.progress;
            ui.add(egui::ProgressBar::new(progress.fraction() as f32).show_percentage());
            ui.label(progress.status());
            let cancelling = run.cancel.load(Ordering::Relaxed);
            if ui
                .add_enabled(!cancelling, egui::Button::new("Cancel"))
                .on_hover_text("Stop after the current batch; what was indexed is kept")
                .clicked()
            {
                run.cancel.store(true, Ordering::Relaxed);
            }
        }
        if let Some((dir, report)) = &self.last {
            ui.separator();
            report_ui(ui, dir, report);
        }
    }
}

/// The library index for `folder`: the one it was indexed into before, or a new folder under
/// `library_dir` named after it.
pub(crate) fn index_dir_for(
    library: &[LibraryEntry],
    library_dir: &Path,
    folder: &Path,
) -> PathBuf {
    let existing = library
        .iter()
        .find(|entry| entry.sources.iter().any(|source| source == folder))
        .and_then(|entry| entry.location.folder());
    if let Some(dir) = existing {
        return dir.to_owned();
    }
    let name = folder
        .file_name()
        .map_or_else(|| "index".to_owned(), |n| n.to_string_lossy().into_owned());
    let mut dir = library_dir.join(&name);
    let mut n = 1;
    while dir.exists() {
        n += 1;
        dir = library_dir.join(format!("{name}-{n}"));
    }
    dir
}

/// What the last indexing run did, with every file it could not index and why.
fn report_ui(ui: &mut egui::Ui, dir: &Path, report: &IndexReport) {
    ui.strong(format!("Last run ({})", file_name(dir)));
    ui.label(format!(
        "{} added, {} updated, {} removed, {} unchanged; {} chunks in {:.1} s{}",
        report.added,
        report.updated,
        report.removed,
        report.unchanged,
        report.chunks,
        report.elapsed.as_secs_f64(),
        if report.cancelled { "; cancelled" } else { "" }
    ));
    let problems = [
        (&report.skipped, "not indexed", ui.visuals().error_fg_color),
        (
            &report.warnings,
            "indexed with a warning",
            ui.visuals().warn_fg_color,
        ),
    ];
    for (files, what, colour) in problems {
        if !files.is_empty() {
            files_ui(ui, what, what, files, colour, true);
        }
    }
}
