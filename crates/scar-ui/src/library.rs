//! The library panel: the user's indexes, adding a folder or an index, and what the open index
//! holds, with the files it could not read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use scar_index::Skipped;
use scar_retrieve::Retriever;

use crate::worker::{Pick, Worker};
use crate::{Result, Settings, file_name};

/// What the user asked of the library panel, for the app to carry out.
pub(crate) enum LibraryAction {
    /// Show a file dialog.
    Pick(Pick),
    /// Send questions to the index in this folder.
    Select(PathBuf),
    /// Index new and changed files of an entry's sources.
    Update { dir: PathBuf, sources: Vec<PathBuf> },
    /// Remove the entry at this place from the library.
    Forget(usize),
}

/// The open index: which one, and what it holds.
pub(crate) struct LibraryPanel {
    /// The open index, shared with the retriever thread, which embeds questions against it.
    retriever: Option<Arc<Retriever>>,
    opening: Option<PathBuf>,
    /// An index that failed to open is not retried until the user selects it again.
    open_failed: Option<PathBuf>,
    /// The files the open index could not read, as its runs listed them.
    skipped: Result<Vec<Skipped>, String>,
    /// The open index's languages (`Hindi 2 · English 1`), counted once when it opens.
    languages: String,
}

impl Default for LibraryPanel {
    fn default() -> Self {
        Self {
            retriever: None,
            opening: None,
            open_failed: None,
            skipped: Ok(Vec::new()),
            languages: String::new(),
        }
    }
}

impl LibraryPanel {
    /// The open index, which may not be the current one yet.
    pub fn retriever(&self) -> Option<&Arc<Retriever>> {
        self.retriever.as_ref()
    }

    /// The open index if it is `current`.
    pub fn current(&self, current: Option<&Path>) -> Option<&Arc<Retriever>> {
        self.retriever
            .as_ref()
            .filter(|r| Some(r.index().dir()) == current)
    }

    pub fn is_open(&self, dir: &Path) -> bool {
        self.retriever
            .as_ref()
            .is_some_and(|r| r.index().dir() == dir)
    }

    /// The index being opened.
    pub fn opening(&self) -> Option<&Path> {
        self.opening.as_deref()
    }

    /// True while an index opens or the `current` one is about to.
    pub fn is_busy(&self, current: Option<&Path>) -> bool {
        self.opening.is_some() || self.index_to_open(current).is_some()
    }

    /// The `current` index, if it is neither open, opening nor known to fail.
    fn index_to_open(&self, current: Option<&Path>) -> Option<PathBuf> {
        let current = current?;
        let wait = self.opening.is_some() || self.open_failed.as_deref() == Some(current);
        (self.current(Some(current)).is_none() && !wait).then(|| current.to_owned())
    }

    /// Asks the worker to open the `current` index, unless it is open, opening or failed.
    pub fn start_opening(&mut self, ctx: &egui::Context, worker: &Worker, current: Option<&Path>) {
        if let Some(dir) = self.index_to_open(current) {
            self.opening = Some(dir.clone());
            worker.open(ctx, dir);
        }
    }

    /// The user chose an index: one that failed to open is tried again.
    pub fn retry_failed(&mut self) {
        self.open_failed = None;
    }

    /// Takes in the index the worker opened in `dir`; `None` when the user has moved on to
    /// another index than `current` meanwhile.
    pub fn opened(
        &mut self,
        current: Option<&Path>,
        dir: PathBuf,
        result: Result<Arc<Retriever>>,
        skipped: Result<Vec<Skipped>, String>,
    ) -> Option<Result<()>> {
        self.opening = None;
        if current != Some(dir.as_path()) {
            return None;
        }
        Some(match result {
            Ok(retriever) => {
                let languages: Vec<String> = retriever
                    .index()
                    .languages()
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                self.languages = languages.join(" · ");
                self.retriever = Some(retriever);
                self.skipped =
                    skipped.map_err(|error| format!("the list of skipped files: {error}"));
                Ok(())
            }
            Err(error) => {
                self.open_failed = Some(dir);
                Err(error)
            }
        })
    }

    /// Closes the open index: it was removed, or changed on disk.
    pub fn close(&mut self) {
        self.retriever = None;
    }

    /// The heading, adding a folder or an index (not while `indexing`), the entries of
    /// `settings`' library, and what the open one holds.
    pub fn library_ui(
        &self,
        ui: &mut egui::Ui,
        settings: &Settings,
        indexing: bool,
    ) -> Option<LibraryAction> {
        let mut action = None;
        ui.add_space(6.0);
        ui.heading("Library");
        ui.add_enabled_ui(!indexing, |ui| {
            ui.horizontal(|ui| {
                if ui
                    .button("➕ Add folder…")
                    .on_hover_text("Index a folder of documents into a new library entry")
                    .clicked()
                {
                    action = Some(LibraryAction::Pick(Pick::FolderToIndex));
                }
                if ui
                    .button("📂 Open index…")
                    .on_hover_text("Add an index built with `scar index`")
                    .clicked()
                {
                    action = Some(LibraryAction::Pick(Pick::ExistingIndex));
                }
            });
        });
        ui.weak("…or drop a folder on the window");
        ui.add_space(4.0);
        let action = entries_ui(ui, settings, indexing).or(action);
        if settings.library.is_empty() {
            ui.weak("No indexes yet.");
        }
        self.summary_ui(ui);
        action
    }

    /// What the open index holds: its model, documents by format and by language, chunks, and
    /// the files it could not read.
    fn summary_ui(&self, ui: &mut egui::Ui) {
        let Some(retriever) = &self.retriever else {
            return;
        };
        let index = retriever.index();
        ui.add_space(4.0);
        ui.weak(&index.manifest().model.id);
        ui.weak(format!(
            "{} · {} chunks · {}",
            files_count(index.documents().len()),
            index.len(),
            // An attachment counts as its own format.
            formats(
                index
                    .documents()
                    .iter()
                    .map(|d| { d.attachment.as_deref().map_or(d.path.as_path(), Path::new) })
            )
        ));
        if !self.languages.is_empty() {
            ui.weak(&self.languages);
        }
        match &self.skipped {
            Ok(skipped) if skipped.is_empty() => {}
            Ok(skipped) => {
                let colour = ui.visuals().error_fg_color;
                files_ui(ui, "skipped", "skipped-in-index", skipped, colour, false);
            }
            Err(error) => {
                ui.colored_label(ui.visuals().warn_fg_color, error);
            }
        }
    }
}

/// The library's entries, the current one marked, each with update and remove buttons.
fn entries_ui(ui: &mut egui::Ui, settings: &Settings, indexing: bool) -> Option<LibraryAction> {
    let mut action = None;
    for (n, entry) in settings.library.iter().enumerate() {
        let current = settings.current.as_ref() == Some(&entry.dir);
        // Right to left, so that a long name is cut short instead of pushing the buttons out.
        let row = egui::Layout::right_to_left(egui::Align::Center);
        ui.allocate_ui_with_layout(egui::vec2(ui.available_width(), 20.0), row, |ui| {
            if ui
                .small_button("🗑")
                .on_hover_text("Remove from the library (the index stays on disk)")
                .clicked()
            {
                action = Some(LibraryAction::Forget(n));
            }
            let can_update = !entry.sources.is_empty() && !indexing;
            if ui
                .add_enabled(can_update, egui::Button::new("⟳").small())
                .on_hover_text("Index new and changed files")
                .clicked()
            {
                action = Some(LibraryAction::Update {
                    dir: entry.dir.clone(),
                    sources: entry.sources.clone(),
                });
            }
            let sources = entry
                .sources
                .iter()
                .map(|s| format!("\nfrom {}", s.display()));
            let hover = format!("{}{}", entry.dir.display(), sources.collect::<String>());
            let name = egui::Button::selectable(current, entry.name()).truncate();
            let width = ui.available_width();
            if ui
                .add_sized([width, 18.0], name)
                .on_hover_text(hover)
                .clicked()
            {
                action = Some(LibraryAction::Select(entry.dir.clone()));
            }
        });
    }
    action
}

/// Documents counted by extension, most first: `3 pdf, 2 docx, 1 md`.
fn formats<'p>(paths: impl Iterator<Item = &'p Path>) -> String {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for path in paths {
        let extension = path.extension().map_or_else(
            || "no extension".to_owned(),
            |e| e.to_string_lossy().to_lowercase(),
        );
        *counts.entry(extension).or_default() += 1;
    }
    let mut counts: Vec<(String, usize)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts
        .iter()
        .map(|(extension, count)| format!("{count} {extension}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A collapsible list of files, each with its reason; the full path shows on hover.
pub(crate) fn files_ui(
    ui: &mut egui::Ui,
    what: &str,
    id: &str,
    files: &[Skipped],
    colour: egui::Color32,
    open: bool,
) {
    egui::CollapsingHeader::new(format!("{} {what}", files_count(files.len())))
        .id_salt(id)
        .default_open(open)
        .show(ui, |ui| {
            for file in files {
                ui.colored_label(
                    colour,
                    format!("{}: {}", file_name(&file.path), file.reason),
                )
                .on_hover_text(file.path.display().to_string());
            }
        });
}

pub(crate) fn files_count(n: usize) -> String {
    if n == 1 {
        "1 file".to_owned()
    } else {
        format!("{n} files")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_counted_most_first() {
        let paths = [
            "a.PDF", "b.pdf", "c.docx", "Makefile", "d.md", "e.md", "f.pdf",
        ]
        .map(Path::new);
        assert_eq!(
            formats(paths.into_iter()),
            "3 pdf, 2 md, 1 docx, 1 no extension"
        );
    }

    #[test]
    fn file_counts_agree_in_number() {
        assert_eq!(files_count(1), "1 file");
        assert_eq!(files_count(3), "3 files");
    }
}
