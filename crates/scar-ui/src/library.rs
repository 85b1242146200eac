//! The library panel: the user's indexes and stores, adding a folder, an index or a store, and
//! what the open one holds, with the files it could not read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use scar_index::Skipped;
use scar_retrieve::ChunkStore;

use crate::worker::{AnyRetriever, Opened, Pick, Worker};
use crate::{Location, Result, Settings, file_name};

/// What the user asked of the library panel, for the app to carry out.
pub(crate) enum LibraryAction {
    /// Show a file dialog.
    Pick(Pick),
    /// Send questions to this index or store.
    Select(Location),
    /// Add the store at this URL to the library, and send questions to it.
    OpenStore(String),
    /// Index new and changed files of an entry's sources.
    Update { dir: PathBuf, sources: Vec<PathBuf> },
    /// Remove the entry at this place from the library.
    Forget(usize),
}

/// The open index or store: which one, and what it holds.
pub(crate) struct LibraryPanel {
    /// The open index or store, shared with the retriever thread, which embeds questions
    /// against it.
    open: Option<OpenEntry>,
    opening: Option<Location>,
    /// An entry that failed to open is not retried until the user selects it again.
    open_failed: Option<Location>,
    /// The files the open index could not read, as its runs listed them.
    skipped: Result<Vec<Skipped>, String>,
    /// The URL typed to add a store.
    store_url: String,
}

/// An open entry and what it holds, counted once when it opened.
struct OpenEntry {
    location: Location,
    retriever: Arc<AnyRetriever>,
    /// `3 files · 14 chunks · 2 md, 1 pdf`.
    contents: String,
    /// `14 chunks in 3 documents · all-MiniLM-L6-v2`, for the status line.
    status: String,
    /// Its languages (`Hindi 2 · English 1`); an index folder's only.
    languages: String,
}

impl Default for LibraryPanel {
    fn default() -> Self {
        Self {
            open: None,
            opening: None,
            open_failed: None,
            skipped: Ok(Vec::new()),
            store_url: String::new(),
        }
    }
}

impl LibraryPanel {
    /// The open index or store, which may not be the current one yet.
    pub fn retriever(&self) -> Option<&Arc<AnyRetriever>> {
        self.open.as_ref().map(|open| &open.retriever)
    }

    /// The open index or store if it is `current`.
    pub fn current(&self, current: Option<&Location>) -> Option<(&Location, &Arc<AnyRetriever>)> {
        self.open
            .as_ref()
            .filter(|open| Some(&open.location) == current)
            .map(|open| (&open.location, &open.retriever))
    }

    pub fn is_open(&self, location: &Location) -> bool {
        self.open
            .as_ref()
            .is_some_and(|open| &open.location == location)
    }

    /// The index or store being opened.
    pub fn opening(&self) -> Option<&Location> {
        self.opening.as_ref()
    }

    /// What the open index or store holds, in the status line's words.
    pub fn status(&self) -> Option<&str> {
        self.open.as_ref().map(|open| open.status.as_str())
    }

    /// True while an index or store opens or the `current` one is about to.
    pub fn is_busy(&self, current: Option<&Location>) -> bool {
        self.opening.is_some() || self.entry_to_open(current).is_some()
    }

    /// The `current` entry, if it is neither open, opening nor known to fail.
    fn entry_to_open(&self, current: Option<&Location>) -> Option<Location> {
        let current = current?;
        let wait = self.opening.is_some() || self.open_failed.as_ref() == Some(current);
        (self.current(Some(current)).is_none() && !wait).then(|| current.clone())
    }

    /// Asks the worker to open the `current` entry, unless it is open, opening or failed.
    pub fn start_opening(
        &mut self,
        ctx: &egui::Context,
        worker: &Worker,
        current: Option<&Location>,
    ) {
        if let Some(location) = self.entry_to_open(current) {
            self.opening = Some(location.clone());
            worker.open(ctx, location);
        }
    }

    /// The user chose an index: one that failed to open is tried again.
    pub fn retry_failed(&mut self) {
        self.open_failed = None;
    }

    /// Takes in the index or store the worker opened at `location`; `None` when the user has
    /// moved on to another entry than `current` meanwhile.
    pub fn opened(
        &mut self,
        current: Option<&Location>,
        location: Location,
        result: Result<Opened>,
        skipped: Result<Vec<Skipped>, String>,
    ) -> Option<Result<()>> {
        self.opening = None;
        if current != Some(&location) {
            return None;
        }
        Some(match result {
            Ok(Opened {
                retriever,
                documents,
            }) => {
                let store = retriever.store();
                let languages: Vec<String> = store
                    .folder_index()
                    .map(|index| index.languages().iter().map(ToString::to_string).collect())
                    .unwrap_or_default();
                // An attachment counts as its own format.
                let formats = formats(
                    documents
                        .iter()
                        .map(|d| d.attachment.as_deref().map_or(d.path.as_path(), Path::new)),
                );
                self.open = Some(OpenEntry {
                    contents: format!(
                        "{} · {} chunks · {formats}",
                        files_count(documents.len()),
                        store.len(),
                    ),
                    status: format!(
                        "{} chunks in {} documents · {}",
                        store.len(),
                        documents.len(),
                        store.model().id
                    ),
                    languages: languages.join(" · "),
                    location,
                    retriever,
                });
                self.skipped =
                    skipped.map_err(|error| format!("the list of skipped files: {error}"));
                Ok(())
            }
            Err(error) => {
                self.open_failed = Some(location);
                Err(error)
            }
        })
    }

    /// Closes the open index: it was removed, or changed on disk.
    pub fn close(&mut self) {
        self.open = None;
    }

    /// The heading, adding a folder or an index (not while `indexing`), the entries of
    /// `settings`' library, and what the open one holds.
    pub fn library_ui(
        &mut self,
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
        let action = self.store_ui(ui).or(action);
        ui.add_space(4.0);
        let action = entries_ui(ui, settings, indexing).or(action);
        if settings.library.is_empty() {
            ui.weak("No indexes yet.");
        }
        self.summary_ui(ui);
        action
    }

    /// A PostgreSQL store (`scar index --store`) to add, by its URL.
    fn store_ui(&mut self, ui: &mut egui::Ui) -> Option<LibraryAction> {
        let mut action = None;
        egui::CollapsingHeader::new("PostgreSQL store")
            .id_salt("store")
            .show(ui, |ui| {
                let edit = egui::TextEdit::singleline(&mut self.store_url)
                    .hint_text("postgres://user@host:5432/database");
                let response = ui.add(edit);
                let entered =
                    response.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                let url = self.store_url.trim();
                if (ui
                    .add_enabled(!url.is_empty(), egui::Button::new("Open store"))
                    .on_hover_text("Add a store that `scar index --store` wrote to")
                    .clicked()
                    || entered)
                    && !url.is_empty()
                {
                    action = Some(LibraryAction::OpenStore(url.to_owned()));
                }
            });
        action
    }

    /// What the open index or store holds: its model, documents by format and by language,
    /// chunks, and the files it could not read.
    fn summary_ui(&self, ui: &mut egui::Ui) {
        let Some(open) = &self.open else {
            return;
        };
        ui.add_space(4.0);
        ui.weak(&open.retriever.store().model().id);
        ui.weak(&open.contents);
        if !open.languages.is_empty() {
            ui.weak(&open.languages);
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
        let current = settings.current.as_ref() == Some(&entry.location);
        // Right to left, so that a long name is cut short instead of pushing the buttons out.
        let row = egui::Layout::right_to_left(egui::Align::Center);
        ui.allocate_ui_with_layout(egui::vec2(ui.available_width(), 20.0), row, |ui| {
            if ui
                .small_button("🗑")
                .on_hover_text(match entry.location {
                    Location::Folder(_) => "Remove from the library (the index stays on disk)",
                    Location::Store(_) => "Remove from the library (the store keeps its chunks)",
                })
                .clicked()
            {
                action = Some(LibraryAction::Forget(n));
            }
            let can_update = !entry.sources.is_empty() && !indexing;
            if ui
                .add_enabled(can_update, egui::Button::new("⟳").small())
                .on_hover_text("Index new and changed files")
                .clicked()
                && let Some(dir) = entry.location.folder()
            {
                action = Some(LibraryAction::Update {
                    dir: dir.to_owned(),
                    sources: entry.sources.clone(),
                });
            }
            let sources = entry
                .sources
                .iter()
                .map(|s| format!("\nfrom {}", s.display()));
            let hover = format!("{}{}", entry.location, sources.collect::<String>());
            let name = egui::Button::selectable(current, entry.name()).truncate();
            let width = ui.available_width();
            if ui
                .add_sized([width, 18.0], name)
                .on_hover_text(hover)
                .clicked()
            {
                action = Some(LibraryAction::Select(entry.location.clone()));
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
