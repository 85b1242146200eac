//! The library panel: the user's indexes, adding a folder, indexing progress and the files that
//! could not be indexed.

use std::path::Path;
use std::sync::atomic::Ordering;

use scar_index::{IndexReport, Skipped};

use crate::worker::Pick;
use crate::{ScarApp, file_name};

impl ScarApp {
    pub(crate) fn library_ui(&mut self, ui: &mut egui::Ui) {
        ui.add_space(6.0);
        ui.heading("Library");
        ui.add_enabled_ui(self.indexing.is_none(), |ui| {
            ui.horizontal(|ui| {
                if ui
                    .button("➕ Add folder…")
                    .on_hover_text("Index a folder of documents into a new library entry")
                    .clicked()
                {
                    self.pick(ui.ctx(), Pick::FolderToIndex);
                }
                if ui
                    .button("📂 Open index…")
                    .on_hover_text("Add an index built with `scar index`")
                    .clicked()
                {
                    self.pick(ui.ctx(), Pick::ExistingIndex);
                }
            });
        });
        ui.weak("…or drop a folder on the window");
        ui.add_space(4.0);
        self.entries_ui(ui);
        self.summary_ui(ui);
        self.conversations_ui(ui);
        if let Some(indexing) = &self.indexing {
            ui.separator();
            ui.strong(format!("Indexing into {}", indexing.dir.display()));
            let progress = &indexing.progress;
            ui.add(egui::ProgressBar::new(progress.fraction() as f32).show_percentage());
            ui.label(progress.status());
            let cancelling = indexing.cancel.load(Ordering::Relaxed);
            if ui
                .add_enabled(!cancelling, egui::Button::new("Cancel"))
                .on_hover_text("Stop after the current batch; what was indexed is kept")
                .clicked()
            {
                indexing.cancel.store(true, Ordering::Relaxed);
            }
        }
        if let Some((dir, report)) = &self.last_indexing {
            ui.separator();
            report_ui(ui, dir, report);
        }
    }

    fn entries_ui(&mut self, ui: &mut egui::Ui) {
        let mut select = None;
        let mut update = None;
        let mut forget = None;
        for (n, entry) in self.settings.library.iter().enumerate() {
            let current = self.settings.current.as_ref() == Some(&entry.dir);
            // Right to left, so that a long name is cut short instead of pushing the buttons out.
            let row = egui::Layout::right_to_left(egui::Align::Center);
            ui.allocate_ui_with_layout(egui::vec2(ui.available_width(), 20.0), row, |ui| {
                if ui
                    .small_button("🗑")
                    .on_hover_text("Remove from the library (the index stays on disk)")
                    .clicked()
                {
                    forget = Some(n);
                }
                let can_update = !entry.sources.is_empty() && self.indexing.is_none();
                if ui
                    .add_enabled(can_update, egui::Button::new("⟳").small())
                    .on_hover_text("Index new and changed files")
                    .clicked()
                {
                    update = Some((entry.dir.clone(), entry.sources.clone()));
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
                    select = Some(entry.dir.clone());
                }
            });
        }
        if let Some(dir) = select {
            self.select_index(dir);
        }
        if let Some((dir, sources)) = update {
            self.start_indexing(ui.ctx(), dir, sources);
        }
        if let Some(n) = forget {
            let entry = self.settings.library.remove(n);
            if self.settings.current.as_ref() == Some(&entry.dir) {
                self.settings.current = None;
                self.retriever = None;
                self.evidence = None;
            }
        }
        if self.settings.library.is_empty() {
            ui.weak("No indexes yet.");
        }
    }

    /// What the open index holds: its model, documents by format, chunks, and the files it
    /// could not read.
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

/// A collapsible list of files, each with its reason; the full path shows on hover.
fn files_ui(
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

fn files_count(n: usize) -> String {
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
