//! The app: its panels each own their state, and the app lays them out and routes between
//! them what the workers delivered and what the user asked. What the user wants (an index, a
//! question, controls) is compared each frame with what the workers delivered, and the
//! difference is sent to them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use scar_answer::{Answer, AnswerReport, Turn};
use scar_core::{ChunkId, ErrorChain};
use scar_index::{IndexReport, Skipped};
use scar_retrieve::SearchReport;

use crate::answer::{AnswerAction, AnswerPanel};
use crate::conversation::{conversations_ui, current_turns};
use crate::indexing::{IndexingPanel, index_dir_for};
use crate::library::{LibraryAction, LibraryPanel};
use crate::question::QuestionPanel;
use crate::worker::{Event, Found, Opened, Pick, Wish, Worker};
use crate::{
    Controls, Environment, FileDialogs, LibraryEntry, Location, Result, Settings, UiError,
};

/// The desktop app: call [`ScarApp::ui`] every frame.
pub struct ScarApp {
    settings: Settings,
    worker: Worker,
    /// The user's indexes and the open one.
    library: LibraryPanel,
    /// The question asked and its evidence.
    question: QuestionPanel,
    /// The answer generated from the evidence; cleared whenever the report changes.
    answer: AnswerPanel,
    /// Indexing runs, and the watches that start them.
    indexing: IndexingPanel,
    /// The last thing that went wrong, until the user's next action.
    error: Option<UiError>,
}

impl ScarApp {
    /// An app showing `settings`' library, controls and question; it opens the current index
    /// on the first frame.
    pub fn new(settings: Settings, environment: Environment, dialogs: impl FileDialogs) -> Self {
        Self {
            settings,
            worker: Worker::new(environment, Arc::new(dialogs)),
            library: LibraryPanel::default(),
            question: QuestionPanel::default(),
            answer: AnswerPanel::default(),
            indexing: IndexingPanel::default(),
            error: None,
        }
    }

    /// What to persist between runs.
    #[must_use]
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Adds the index in `dir` to the library (once) and sends questions to it.
    pub fn open_index(&mut self, dir: impl Into<PathBuf>) {
        self.open(Location::Folder(dir.into()));
    }

    /// Adds the index folder or store at `location` to the library (once) and sends questions
    /// to it.
    pub fn open(&mut self, location: Location) {
        if !self.settings.library.iter().any(|e| e.location == location) {
            self.settings.library.push(LibraryEntry {
                location: location.clone(),
                sources: Vec::new(),
            });
        }
        self.select(location);
    }

    fn select(&mut self, location: Location) {
        self.settings.current = Some(location);
        self.library.retry_failed();
        self.error = None;
    }

    /// Asks `question` of the current index; the evidence arrives on a later frame. A question
    /// that follows an answered one in a conversation is first rewritten by the chat model to
    /// stand alone.
    pub fn ask(&mut self, question: impl Into<String>) {
        self.settings.question = question.into();
        let follows_up = !self.conversation().is_empty();
        self.question.ask(&self.settings.question, follows_up);
        self.asked();
    }

    /// A new question makes the answer and the error out of date.
    fn asked(&mut self) {
        self.answer.clear();
        self.error = None;
    }

    /// The live controls.
    #[must_use]
    pub fn controls(&self) -> &Controls {
        &self.settings.controls
    }

    /// Changes the controls. A new k or first stage asks the worker for new seeds; anything
    /// else (the policy, λ, γ, the depth, the window, the block) re-runs the policy on the
    /// cached seeds and rankings at once.
    pub fn set_controls(&mut self, controls: Controls) {
        let before = std::mem::replace(&mut self.settings.controls, controls);
        if before != controls && !before.seeds_differ(&controls) {
            self.decide_again();
        }
    }

    /// What the policy decided for the asked question, once it has arrived.
    #[must_use]
    pub fn report(&self) -> Option<&SearchReport> {
        self.question.report()
    }

    /// The last thing that went wrong, until the user's next action.
    #[must_use]
    pub fn error(&self) -> Option<&UiError> {
        self.error.as_ref()
    }

    /// True while an index is opening or indexing, a question is being embedded, or one of
    /// these is about to start. Answering is not counted: see [`ScarApp::is_answering`].
    #[must_use]
    pub fn is_busy(&self) -> bool {
        let current = self.settings.current.as_ref();
        self.library.is_busy(current)
            || self.indexing.is_running()
            || self
                .question
                .is_busy(self.library.current(current), &self.settings.controls)
    }

    /// True while an answer is being generated.
    #[must_use]
    pub fn is_answering(&self) -> bool {
        self.answer.is_running()
    }

    /// The finished answer to the evidence shown, if one was generated and not cleared.
    #[must_use]
    pub fn answer(&self) -> Option<&Answer> {
        self.answer.answer()
    }

    /// Starts answering the asked question from the evidence shown, on the answer thread.
    pub fn start_answer(&mut self, ctx: &egui::Context) {
        match (self.question.searched(), self.library.retriever()) {
            (Some(question), Some(retriever)) => {
                self.answer.start(
                    ctx,
                    &self.worker,
                    question,
                    retriever,
                    &self.settings.answer,
                );
            }
            _ => self.answer.clear(),
        }
    }

    /// The chunk open in the reader.
    #[must_use]
    pub fn selected_chunk(&self) -> Option<ChunkId> {
        self.question.selected()
    }

    /// The turns of the conversation a follow-up continues.
    #[must_use]
    pub fn conversation(&self) -> &[Turn] {
        current_turns(&self.settings)
    }

    /// True while a follow-up is being rewritten to stand alone.
    #[must_use]
    pub fn is_rewriting(&self) -> bool {
        self.question.is_rewriting()
    }

    /// The next question starts a new conversation.
    pub fn new_conversation(&mut self) {
        self.settings.conversation = None;
    }

    /// Follow-ups continue conversation `n` of [`Settings::conversations`](crate::Settings).
    pub fn reopen_conversation(&mut self, n: usize) {
        if n < self.settings.conversations.len() {
            self.settings.conversation = Some(n);
        }
    }

    /// Writes the ledger of the asked question as `scar search --json` prints it.
    pub fn export_ledger(&self, path: &Path) -> Result<()> {
        let report = self.question.report().ok_or(UiError::NothingToExport)?;
        let mut file = std::io::BufWriter::new(fs_err::File::create(path)?);
        serde_json::to_writer_pretty(&mut file, report)?;
        std::io::Write::write_all(&mut file, b"\n")?;
        std::io::Write::flush(&mut file)?;
        Ok(())
    }

    /// Draws the whole app into `ui`, after taking in what the workers delivered.
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        let ctx = ui.ctx().clone();
        self.receive(&ctx);
        self.take_dropped(&ctx);
        self.indexing
            .keep_watching(&ctx, &self.worker, &self.settings.library);
        if let Some((dir, sources)) = self.indexing.next_stale(&self.settings.library) {
            self.start_indexing(&ctx, dir, sources, true);
        }
        self.start_work(&ctx);
        egui::Panel::top("question").show(ui, |ui| {
            let follows_up = !self.conversation().is_empty();
            let loading = self.library.opening().is_some();
            let settings = &mut self.settings;
            if self.question.question_ui(
                ui,
                &mut settings.question,
                follows_up,
                &settings.answer.model,
                loading,
            ) {
                self.asked();
            }
        });
        egui::Panel::bottom("status").show(ui, |ui| self.status_ui(ui));
        egui::Panel::left("library")
            .default_size(260.0)
            .show(ui, |ui| {
                let indexing = self.indexing.is_running();
                if let Some(action) = self.library.library_ui(ui, &self.settings, indexing) {
                    self.library_action(ui.ctx(), action);
                }
                conversations_ui(ui, &mut self.settings);
                self.indexing.indexing_ui(ui);
            });
        egui::Panel::right("controls")
            .default_size(240.0)
            .show(ui, |ui| {
                let mut controls = self.settings.controls;
                let can_export = self.question.report().is_some();
                let export = crate::controls::controls_ui(
                    ui,
                    &mut controls,
                    &mut self.settings.answer,
                    can_export,
                );
                self.set_controls(controls);
                if export {
                    self.worker.pick(ui.ctx(), Pick::ExportPath);
                }
            });
        if self.question.report().is_some() {
            egui::Panel::top("answer").show(ui, |ui| {
                let earlier = self.question.earlier_turns(current_turns(&self.settings));
                let action = self
                    .answer
                    .answer_ui(ui, &self.settings.answer.model, earlier);
                match action {
                    Some(AnswerAction::Start) => self.start_answer(ui.ctx()),
                    Some(AnswerAction::Show(id)) => self.select_chunk(id),
                    None => {}
                }
            });
        }
        egui::CentralPanel::default().show(ui, |ui| {
            let has_index = self.settings.current.is_some();
            let open = self.question.evidence_ui(ui, has_index);
            if let Some((path, page)) = open {
                self.worker.open_path(ui.ctx(), path, page);
            }
        });
    }

    /// Routes what the workers delivered to the panels that asked for it.
    fn receive(&mut self, ctx: &egui::Context) {
        let events: Vec<Event> = self.worker.events().collect();
        for event in events {
            match event {
                Event::Opened {
                    location,
                    result,
                    skipped,
                } => self.opened(location, result, skipped),
                Event::Prepared { wish, result } => self.prepared(wish, result.map(|found| *found)),
                Event::Progress(progress) => self.indexing.progress(progress),
                Event::Indexed {
                    dir,
                    sources,
                    result,
                } => self.indexed(dir, sources, result),
                Event::AnswerText { id, piece } => self.answer.text(id, &piece),
                Event::Answered { id, result } => self.answered(id, result),
                Event::Rewritten { id, result } => {
                    if let Some(error) = self.question.rewritten(id, result) {
                        self.error = Some(error);
                    }
                }
                Event::SourcesChanged(dir) => self.indexing.sources_changed(dir),
                Event::WatchFailed(error) => self.error = Some(error),
                Event::OpenFailed { path, error } => {
                    self.error = Some(UiError::Open {
                        path,
                        source: error,
                    });
                }
                Event::Picked(Pick::FolderToIndex, folder) => self.index_folder(ctx, &folder),
                Event::Picked(Pick::ExistingIndex, dir) => self.open_index(dir),
                Event::Picked(Pick::ExportPath, path) => {
                    self.error = self.export_ledger(&path).err();
                }
            }
        }
    }

    /// What was dropped on the window: an index joins the library, a folder or file is indexed
    /// into a new library entry (one at a time: a drop during indexing is refused).
    fn take_dropped(&mut self, ctx: &egui::Context) {
        let dropped: Vec<PathBuf> = ctx.input(|input| {
            input
                .raw
                .dropped_files
                .iter()
                .map(|file| file.path().to_owned())
                .collect()
        });
        for path in dropped {
            if scar_index::is_index(&path) {
                self.open_index(path);
            } else if self.indexing.is_running() {
                self.error = Some(UiError::StillIndexing(path));
            } else {
                self.index_folder(ctx, &path);
            }
        }
    }

    fn library_action(&mut self, ctx: &egui::Context, action: LibraryAction) {
        match action {
            LibraryAction::Pick(pick) => self.worker.pick(ctx, pick),
            LibraryAction::Select(location) => self.select(location),
            LibraryAction::OpenStore(url) => match Location::store(&url) {
                Ok(location) => self.open(location),
                Err(error) => self.error = Some(error),
            },
            LibraryAction::Update { dir, sources } => {
                self.start_indexing(ctx, dir, sources, false);
            }
            LibraryAction::Forget(n) => {
                let entry = self.settings.library.remove(n);
                if self.settings.current.as_ref() == Some(&entry.location) {
                    self.settings.current = None;
                    self.close_index();
                }
            }
        }
    }

    fn opened(
        &mut self,
        location: Location,
        result: Result<Opened>,
        skipped: Result<Vec<Skipped>, String>,
    ) {
        let current = self.settings.current.as_ref();
        match self.library.opened(current, location, result, skipped) {
            Some(Ok(())) => self.clear_evidence(),
            Some(Err(error)) => self.error = Some(error),
            None => {}
        }
    }

    fn prepared(&mut self, wish: Wish, result: Result<Found>) {
        let retriever = self.library.current(self.settings.current.as_ref());
        match self
            .question
            .prepared(retriever, &self.settings.controls, wish, result)
        {
            Some(Ok(())) => self.answer.clear(),
            Some(Err(error)) => self.error = Some(error),
            None => {}
        }
    }

    /// Re-runs the policy on the cached seeds, embeddings and rankings: no model involved.
    fn decide_again(&mut self) {
        let Some(retriever) = self.library.retriever() else {
            return;
        };
        match self
            .question
            .decide_again(retriever, &self.settings.controls)
        {
            Some(Ok(())) => {
                self.error = None;
                self.answer.clear();
            }
            Some(Err(error)) => self.error = Some(error),
            None => {}
        }
    }

    fn answered(&mut self, id: u64, result: Result<Box<AnswerReport>>) {
        if let Some(text) = self.answer.answered(id, result) {
            self.question.record_turn(&mut self.settings, &text);
        }
    }

    fn indexed(&mut self, dir: PathBuf, sources: Vec<PathBuf>, result: Result<IndexReport>) {
        let automatic = match self.indexing.finished(&dir, result) {
            Ok(automatic) => automatic,
            Err(error) => {
                self.error = Some(error);
                return;
            }
        };
        let location = Location::Folder(dir);
        match self
            .settings
            .library
            .iter_mut()
            .find(|e| e.location == location)
        {
            Some(entry) => entry.sources = sources,
            None => self.settings.library.push(LibraryEntry {
                location: location.clone(),
                sources,
            }),
        }
        // The open index is a snapshot: reopen it to see what was just committed.
        if self.library.is_open(&location) {
            self.close_index();
        }
        if !automatic {
            self.select(location);
        }
    }

    /// Closes the open index, and with it the evidence from it.
    fn close_index(&mut self) {
        self.library.close();
        self.clear_evidence();
    }

    fn clear_evidence(&mut self) {
        self.question.clear_evidence();
        self.answer.clear();
    }

    /// Indexes `folder` into its library index: the one it was indexed into before, or a new
    /// folder named after it.
    fn index_folder(&mut self, ctx: &egui::Context, folder: &Path) {
        let library_dir = &self.worker.environment().library_dir;
        let dir = index_dir_for(&self.settings.library, library_dir, folder);
        self.start_indexing(ctx, dir, vec![folder.to_owned()], false);
    }

    fn start_indexing(
        &mut self,
        ctx: &egui::Context,
        dir: PathBuf,
        sources: Vec<PathBuf>,
        automatic: bool,
    ) {
        self.error = None;
        self.indexing
            .start(ctx, &self.worker, dir, sources, automatic);
    }

    fn start_work(&mut self, ctx: &egui::Context) {
        let current = self.settings.current.as_ref();
        self.question.start_work(
            ctx,
            &self.worker,
            &self.settings,
            self.library.current(current),
        );
        self.library.start_opening(ctx, &self.worker, current);
    }

    /// Shows chunk `id` in the seam map and opens it in the reader.
    fn select_chunk(&mut self, id: ChunkId) {
        self.question.select_chunk(id);
    }

    fn status_ui(&self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            if let Some(error) = &self.error {
                ui.colored_label(
                    ui.visuals().error_fg_color,
                    format!("⚠ {}", ErrorChain(error)),
                );
            } else if let Some(location) = self.library.opening() {
                ui.label(match location {
                    Location::Folder(dir) => {
                        format!("Loading the index in {} and its model…", dir.display())
                    }
                    Location::Store(_) => format!("Opening the store {location} and its model…"),
                });
            } else if self.question.is_preparing() {
                ui.label("Embedding the question…");
            } else if self.question.has_asked() && self.settings.current.is_none() {
                ui.label("Add a folder or open an index to ask it questions.");
            } else if let Some(status) = self.library.status() {
                ui.weak(status);
                if let Some(report) = self.question.report() {
                    let t = &report.timings;
                    ui.weak(format!(
                        "embed {:.1} ms, first stage {:.1} ms, policy {:.3} ms",
                        t.embed_ms, t.first_stage_ms, t.policy_ms
                    ));
                }
            }
        });
    }
}
