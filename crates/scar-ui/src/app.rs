//! The app's state and how it moves: what the user wants (an index, a question, controls) is
//! compared each frame with what the workers delivered, and the difference is sent to them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use scar_core::{ChunkId, ErrorChain};
use scar_index::{IndexProgress, IndexReport, Skipped};
use scar_answer::Question;
use scar_retrieve::{Prepared, Retriever, SearchReport};

use crate::answer::Answering;
use crate::conversation::{Asked, Rewriting};
use crate::watching::Watch;
use crate::worker::{Event, Pick, Wish, Worker};
use crate::{Controls, Environment, FileDialogs, LibraryEntry, Result, Settings, UiError};

/// The desktop app: call [`ScarApp::ui`] every frame.
pub struct ScarApp {
    pub(crate) settings: Settings,
    pub(crate) worker: Worker,
    /// The open index, shared with the retriever thread, which embeds questions against it.
    pub(crate) retriever: Option<Arc<Retriever>>,
    pub(crate) opening: Option<PathBuf>,
    /// An index that failed to open is not retried until the user selects it again.
    open_failed: Option<PathBuf>,
    /// The question the user asked (the box may since hold other text), and what is searched
    /// for: the question, or a follow-up rewritten to stand alone.
    pub(crate) asked: Option<Asked>,
    /// A follow-up being rewritten before it is searched for.
    pub(crate) rewriting: Option<Rewriting>,
    /// Rewrites started so far, numbering them.
    pub(crate) rewrites_started: u64,
    /// The asked question's answer is a turn of the conversation already.
    pub(crate) turn_recorded: bool,
    /// A question is being embedded; one at a time.
    pub(crate) preparing: bool,
    prepare_failed: Option<Wish>,
    /// The asked question's evidence.
    pub(crate) evidence: Option<Evidence>,
    /// An answer generated from `evidence.question`, kept beside it so that the evidence stays
    /// what the policy decided; cleared whenever the report changes.
    pub(crate) answer: Option<Answering>,
    /// Answers started so far, numbering them.
    pub(crate) answers_started: u64,
    pub(crate) indexing: Option<Indexing>,
    pub(crate) last_indexing: Option<(PathBuf, IndexReport)>,
    /// The files the open index could not read, as its runs listed them.
    pub(crate) skipped: Result<Vec<Skipped>, String>,
    /// The watches over the library's sources, by index folder.
    pub(crate) watches: HashMap<PathBuf, Watch>,
    /// Entries whose files changed, waiting for an indexing run.
    pub(crate) stale: Vec<PathBuf>,
    pub(crate) error: Option<UiError>,
    /// The document shown in the seam map and the chunk open in the reader.
    pub(crate) document: Option<u32>,
    pub(crate) selected: Option<ChunkId>,
}

/// One question's seeds and what the policies made of them.
pub(crate) struct Evidence {
    pub wish: Wish,
    pub prepared: Prepared,
    /// The policy the controls describe, beside static ±1 on the same seeds.
    pub question: Question,
}

/// An indexing run in progress.
pub(crate) struct Indexing {
    pub dir: PathBuf,
    pub progress: IndexProgress,
    pub cancel: Arc<AtomicBool>,
    /// Started by a watch, not by the user: the current index stays current.
    pub automatic: bool,
}

/// Runs the controls' policy on a question's seeds.
fn decide(
    retriever: &Retriever,
    controls: &Controls,
    wish: Wish,
    prepared: Prepared,
) -> Result<Evidence> {
    let question = Question::search(retriever, &prepared, &controls.options()?)?;
    Ok(Evidence {
        wish,
        prepared,
        question,
    })
}

impl ScarApp {
    /// An app showing `settings`' library, controls and question; it opens the current index
    /// on the first frame.
    pub fn new(settings: Settings, environment: Environment, dialogs: impl FileDialogs) -> Self {
        Self {
            settings,
            worker: Worker::new(environment, Arc::new(dialogs)),
            retriever: None,
            opening: None,
            open_failed: None,
            asked: None,
            rewriting: None,
            rewrites_started: 0,
            turn_recorded: false,
            preparing: false,
            prepare_failed: None,
            evidence: None,
            answer: None,
            answers_started: 0,
            indexing: None,
            last_indexing: None,
            skipped: Ok(Vec::new()),
            watches: HashMap::new(),
            stale: Vec::new(),
            error: None,
            document: None,
            selected: None,
        }
    }

    /// What to persist between runs.
    #[must_use]
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Adds the index in `dir` to the library (once) and sends questions to it.
    pub fn open_index(&mut self, dir: impl Into<PathBuf>) {
        let dir = dir.into();
        if !self.settings.library.iter().any(|entry| entry.dir == dir) {
            self.settings.library.push(LibraryEntry {
                dir: dir.clone(),
                sources: Vec::new(),
            });
        }
        self.select_index(dir);
    }

    pub(crate) fn select_index(&mut self, dir: PathBuf) {
        self.settings.current = Some(dir);
        self.open_failed = None;
        self.error = None;
    }

    /// Asks `question` of the current index; the evidence arrives on a later frame. A question
    /// that follows an answered one in a conversation is first rewritten by the chat model to
    /// stand alone.
    pub fn ask(&mut self, question: impl Into<String>) {
        self.settings.question = question.into();
        self.turn_recorded = false;
        self.take_question(self.settings.question.trim().to_owned());
        self.clear_answer();
        self.prepare_failed = None;
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
        self.evidence.as_ref().map(|evidence| evidence.question.report())
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
        self.opening.is_some()
            || self.preparing
            || self.indexing.is_some()
            || self.index_to_open().is_some()
            || self.question_to_prepare().is_some()
            || self.rewriting.is_some()
    }

    /// Writes the ledger of the asked question as `scar search --json` prints it.
    pub fn export_ledger(&self, path: &Path) -> Result<()> {
        let evidence = self.evidence.as_ref().ok_or(UiError::NothingToExport)?;
        let mut file = std::io::BufWriter::new(fs_err::File::create(path)?);
        serde_json::to_writer_pretty(&mut file, evidence.question.report())?;
        std::io::Write::write_all(&mut file, b"\n")?;
        std::io::Write::flush(&mut file)?;
        Ok(())
    }

    /// Draws the whole app into `ui`, after taking in what the workers delivered.
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        let ctx = ui.ctx().clone();
        self.receive(&ctx);
        self.take_dropped(&ctx);
        self.keep_watching(&ctx);
        self.index_stale(&ctx);
        self.start_work(&ctx);
        egui::Panel::top("question").show(ui, |ui| self.question_ui(ui));
        egui::Panel::bottom("status").show(ui, |ui| self.status_ui(ui));
        egui::Panel::left("library")
            .default_size(260.0)
            .show(ui, |ui| self.library_ui(ui));
        egui::Panel::right("controls")
            .default_size(240.0)
            .show(ui, |ui| self.controls_ui(ui));
        if self.evidence.is_some() {
            egui::Panel::top("answer").show(ui, |ui| self.answer_ui(ui));
        }
        egui::CentralPanel::default().show(ui, |ui| self.evidence_ui(ui));
    }

    fn receive(&mut self, ctx: &egui::Context) {
        let events: Vec<Event> = self.worker.events().collect();
        for event in events {
            match event {
                Event::Opened {
                    dir,
                    result,
                    skipped,
                } => self.opened(dir, result, skipped),
                Event::Prepared { wish, result } => self.prepared(wish, result),
                Event::Progress(progress) => {
                    if let Some(indexing) = &mut self.indexing {
                        indexing.progress = progress;
                    }
                }
                Event::Indexed {
                    dir,
                    sources,
                    result,
                } => self.indexed(dir, sources, result),
                Event::AnswerText { id, piece } => self.answer_text(id, &piece),
                Event::Answered { id, result } => self.answered(id, result),
                Event::Rewritten { id, result } => self.rewritten(id, result),
                Event::SourcesChanged(dir) => self.sources_changed(dir),
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
            } else if self.indexing.is_some() {
                self.error = Some(UiError::StillIndexing(path));
            } else {
                self.index_folder(ctx, &path);
            }
        }
    }

    fn opened(
        &mut self,
        dir: PathBuf,
        result: Result<Arc<Retriever>>,
        skipped: Result<Vec<Skipped>, String>,
    ) {
        self.opening = None;
        // The user may have moved on to another index while this one loaded.
        if self.settings.current.as_ref() != Some(&dir) {
            return;
        }
        match result {
            Ok(retriever) => {
                self.retriever = Some(retriever);
                self.skipped =
                    skipped.map_err(|error| format!("the list of skipped files: {error}"));
                self.evidence = None;
                self.clear_answer();
                self.document = None;
                self.selected = None;
            }
            Err(error) => {
                self.open_failed = Some(dir);
                self.error = Some(error);
            }
        }
    }

    fn prepared(&mut self, wish: Wish, result: Result<Prepared>) {
        self.preparing = false;
        // A result for an older wish is dropped: the current one is sent next frame.
        if self.wish().as_ref() != Some(&wish) {
            return;
        }
        let Some(retriever) = self.retriever.clone() else {
            return;
        };
        let decided = result.and_then(|prepared| {
            decide(&retriever, &self.settings.controls, wish.clone(), prepared)
        });
        match decided {
            Ok(evidence) => {
                if let Some(seed) = evidence.question.report().ledger.seeds.first() {
                    self.document = Some(retriever.index().position(seed.id).document);
                    self.selected = Some(seed.id);
                }
                self.evidence = Some(evidence);
                self.clear_answer();
            }
            Err(error) => {
                self.prepare_failed = Some(wish);
                self.error = Some(error);
            }
        }
    }

    /// Re-runs the policy on the cached seeds, embeddings and rankings: no model involved.
    fn decide_again(&mut self) {
        let (Some(retriever), Some(evidence)) = (&self.retriever, &mut self.evidence) else {
            return;
        };
        let question = self
            .settings
            .controls
            .options()
            .map_err(UiError::from)
            .and_then(|options| Ok(Question::search(retriever, &evidence.prepared, &options)?));
        match question {
            Ok(question) => {
                evidence.question = question;
                self.error = None;
                self.clear_answer();
            }
            Err(error) => self.error = Some(error),
        }
    }

    fn indexed(&mut self, dir: PathBuf, sources: Vec<PathBuf>, result: Result<IndexReport>) {
        let automatic = self
            .indexing
            .take()
            .is_some_and(|indexing| indexing.automatic);
        match result {
            Ok(report) => {
                match self.settings.library.iter_mut().find(|e| e.dir == dir) {
                    Some(entry) => entry.sources = sources,
                    None => self.settings.library.push(LibraryEntry {
                        dir: dir.clone(),
                        sources,
                    }),
                }
                // The open index is a snapshot: reopen it to see what was just committed.
                if self
                    .retriever
                    .as_ref()
                    .is_some_and(|r| r.index().dir() == dir)
                {
                    self.retriever = None;
                    self.evidence = None;
                    self.clear_answer();
                }
                if !automatic {
                    self.select_index(dir.clone());
                }
                self.last_indexing = Some((dir, report));
            }
            Err(error) => self.error = Some(error),
        }
    }

    /// Indexes `folder` into its library index: the one it was indexed into before, or a new
    /// folder named after it.
    fn index_folder(&mut self, ctx: &egui::Context, folder: &Path) {
        let existing = self
            .settings
            .library
            .iter()
            .find(|entry| entry.sources.iter().any(|source| source == folder));
        let dir = existing.map_or_else(|| self.new_index_dir(folder), |e| e.dir.clone());
        self.start_indexing(ctx, dir, vec![folder.to_owned()]);
    }

    fn new_index_dir(&self, folder: &Path) -> PathBuf {
        let library = &self.worker.environment().library_dir;
        let name = folder
            .file_name()
            .map_or_else(|| "index".to_owned(), |n| n.to_string_lossy().into_owned());
        let mut dir = library.join(&name);
        let mut n = 1;
        while dir.exists() {
            n += 1;
            dir = library.join(format!("{name}-{n}"));
        }
        dir
    }

    pub(crate) fn start_indexing(
        &mut self,
        ctx: &egui::Context,
        dir: PathBuf,
        sources: Vec<PathBuf>,
    ) {
        let cancel = Arc::new(AtomicBool::new(false));
        self.error = None;
        self.worker
            .index(ctx, dir.clone(), sources, Arc::clone(&cancel));
        self.indexing = Some(Indexing {
            dir,
            progress: IndexProgress::default(),
            cancel,
            automatic: false,
        });
    }

    fn start_work(&mut self, ctx: &egui::Context) {
        self.start_rewrite(ctx);
        if let Some(dir) = self.index_to_open() {
            self.opening = Some(dir.clone());
            self.worker.open(ctx, dir);
        }
        if let Some((retriever, wish)) = self.question_to_prepare() {
            self.preparing = true;
            self.worker.prepare(ctx, retriever, wish);
        }
    }

    /// The current index, if it is neither open, opening nor known to fail.
    fn index_to_open(&self) -> Option<PathBuf> {
        let current = self.settings.current.as_ref()?;
        let open = self
            .retriever
            .as_ref()
            .is_some_and(|r| r.index().dir() == current);
        let wait = self.opening.is_some() || self.open_failed.as_ref() == Some(current);
        (!open && !wait).then(|| current.clone())
    }

    /// The seeds the asked question needs under the current controls.
    fn wish(&self) -> Option<Wish> {
        let current = self.settings.current.as_deref();
        let retriever = self
            .retriever
            .as_ref()
            .filter(|r| Some(r.index().dir()) == current)?;
        Some(Wish {
            index: retriever.index().dir().to_owned(),
            query: self.asked.as_ref()?.standalone.clone(),
            first_stage: self.settings.controls.first_stage,
            k: self.settings.controls.k,
        })
    }

    /// The wish, unless it is fulfilled, failed, or a question is being embedded (one at a
    /// time: while the user drags k, only the latest value is worth embedding).
    fn question_to_prepare(&self) -> Option<(Arc<Retriever>, Wish)> {
        let wish = self.wish()?;
        let fulfilled = self.evidence.as_ref().is_some_and(|e| e.wish == wish);
        if fulfilled || self.preparing || self.prepare_failed.as_ref() == Some(&wish) {
            return None;
        }
        Some((Arc::clone(self.retriever.as_ref()?), wish))
    }

    pub(crate) fn pick(&self, ctx: &egui::Context, pick: Pick) {
        self.worker.pick(ctx, pick);
    }

    fn question_ui(&mut self, ui: &mut egui::Ui) {
        ui.add_space(6.0);
        ui.horizontal(|ui| {
            ui.heading("SCAR");
            let ask_width = 60.0;
            let edit = egui::TextEdit::singleline(&mut self.settings.question)
                .hint_text("Ask your documents a question, then press Enter")
                .desired_width(ui.available_width() - ask_width - 40.0);
            let response = ui.add(edit);
            let entered = response.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
            let clicked = ui
                .add_sized([ask_width, 20.0], egui::Button::new("Ask"))
                .clicked();
            if entered || clicked {
                let question = self.settings.question.clone();
                self.ask(question);
            }
            if self.opening.is_some() || self.preparing {
                ui.spinner();
            }
        });
        self.rewrite_ui(ui);
        ui.add_space(4.0);
    }

    fn status_ui(&self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            if let Some(error) = &self.error {
                ui.colored_label(
                    ui.visuals().error_fg_color,
                    format!("⚠ {}", ErrorChain(error)),
                );
            } else if let Some(dir) = &self.opening {
                ui.label(format!(
                    "Loading the index in {} and its model…",
                    dir.display()
                ));
            } else if self.preparing {
                ui.label("Embedding the question…");
            } else if self.asked.is_some() && self.settings.current.is_none() {
                ui.label("Add a folder or open an index to ask it questions.");
            } else if let Some(retriever) = &self.retriever {
                let index = retriever.index();
                ui.weak(format!(
                    "{} chunks in {} documents · {}",
                    index.len(),
                    index.documents().len(),
                    index.manifest().model.id
                ));
                if let Some(evidence) = &self.evidence {
                    let t = &evidence.question.report().timings;
                    ui.weak(format!(
                        "embed {:.1} ms, first stage {:.1} ms, policy {:.3} ms",
                        t.embed_ms, t.first_stage_ms, t.policy_ms
                    ));
                }
            }
        });
    }

    fn evidence_ui(&mut self, ui: &mut egui::Ui) {
        let (Some(retriever), Some(evidence)) = (&self.retriever, &self.evidence) else {
            ui.centered_and_justified(|ui| {
                ui.weak(if self.settings.current.is_none() {
                    "Add a folder to the library to start."
                } else {
                    "Ask a question: each seed, each neighbour considered, and why it was \
                     accepted or rejected will show here."
                });
            });
            return;
        };
        let index = retriever.index();
        crate::decisions::comparison_ui(ui, evidence.question.report());
        ui.separator();
        let open = crate::seam_map::seam_map_ui(
            ui,
            index,
            evidence.question.report(),
            &mut self.document,
            &mut self.selected,
        );
        if let Some((path, page)) = open {
            self.worker.open_path(ui.ctx(), path, page);
        }
        ui.separator();
        if let Some(id) =
            crate::decisions::decisions_ui(ui, index, evidence.question.report(), &evidence.prepared)
        {
            self.select_chunk(id);
        }
    }

    /// Shows chunk `id` in the seam map and opens it in the reader.
    pub(crate) fn select_chunk(&mut self, id: ChunkId) {
        if let Some(retriever) = &self.retriever {
            self.document = Some(retriever.index().position(id).document);
            self.selected = Some(id);
        }
    }
}
