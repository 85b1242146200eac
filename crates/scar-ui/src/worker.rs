//! Work that must not block the UI: opening an index or a store, preparing a question and
//! reading its seeds' documents, answering it, indexing a folder, and native file dialogs. Each runs on a named thread and reports back through one channel,
//! waking the UI with `request_repaint`.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread;

use scar_answer::{
    AnswerReport, DEFAULT_LLM, GenerationParams, LlmLocator, LoadOptions, LocalModel, Question,
    RerankerModels, Turn, standalone_question,
};
use scar_embed::{Embedder, ModelLocator};
use scar_index::{
    FolderWatch, Index, IndexOptions, IndexProgress, IndexReport, Skipped, finish_interrupted_swap,
    index_paths, indexing_model,
};
use scar_postgres::PgStore;
use scar_retrieve::{ChunkStore, FirstStage, Neighbourhood, Prepared, Retriever, StoredDocument};

use crate::{Environment, FileDialogs, Location, UiError};

/// A retriever over whichever store the library entry names: a folder or a server.
pub(crate) type AnyRetriever = Retriever<Box<dyn ChunkStore>>;

/// An index or store opened, with its model, and the documents it holds.
pub(crate) struct Opened {
    pub retriever: Arc<AnyRetriever>,
    pub documents: Vec<StoredDocument>,
}

/// A question's seeds, and the documents they are in, read once: every policy decides from
/// these on the UI thread without reading the store again.
pub(crate) struct Found {
    pub prepared: Prepared,
    pub neighbourhood: Neighbourhood,
}

/// What a question needs from the first stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wish {
    pub index: Location,
    pub query: String,
    pub first_stage: FirstStage,
    pub k: usize,
}

/// A result coming back to the UI.
pub(crate) enum Event {
    Opened {
        location: Location,
        result: Result<Opened, UiError>,
        /// The files the index could not read, or why that list cannot be read.
        skipped: Result<Vec<Skipped>, String>,
    },
    Prepared {
        wish: Wish,
        /// Boxed: the seeds and their documents are most of an event's size otherwise.
        result: Result<Box<Found>, UiError>,
    },
    Progress(IndexProgress),
    Indexed {
        dir: PathBuf,
        sources: Vec<PathBuf>,
        result: Result<IndexReport, UiError>,
    },
    Picked(Pick, PathBuf),
    /// Files under the sources of the index in this folder changed.
    SourcesChanged(PathBuf),
    /// A library entry's sources could not be watched.
    WatchFailed(UiError),
    /// The system's viewer could not open `path`.
    OpenFailed {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A piece of answer `id`'s text, as the model produced it.
    AnswerText {
        id: u64,
        piece: String,
    },
    Answered {
        id: u64,
        // Boxed: an answer's report holds its search, and every event would carry its size.
        result: Result<Box<AnswerReport>, UiError>,
    },
    /// Follow-up `id`, rewritten to stand alone.
    Rewritten {
        id: u64,
        result: Result<String, UiError>,
    },
}

/// A question for the answer thread: answer `question` with `model`.
pub(crate) struct AnswerJob {
    pub id: u64,
    pub model: String,
    pub question: Question,
    /// The index and model the question was searched on, which find each sentence's source.
    pub retriever: Arc<AnyRetriever>,
    pub params: GenerationParams,
    pub cancel: Arc<AtomicBool>,
}

/// A follow-up for the answer thread: rewrite `question` to stand alone after `earlier`.
pub(crate) struct RewriteJob {
    pub id: u64,
    pub model: String,
    pub earlier: Vec<Turn>,
    pub question: String,
}

/// Work for the answer thread, which owns the chat model.
enum ChatJob {
    // Boxed: a search report is large, and rewrites would carry its size.
    Answer(Box<AnswerJob>),
    Rewrite(RewriteJob),
}

/// What a file dialog is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pick {
    FolderToIndex,
    ExistingIndex,
    ExportPath,
}

/// A job for the retriever thread, which owns the model while it loads or embeds.
enum Job {
    Open(Location),
    Prepare(Arc<AnyRetriever>, Wish),
}

/// Where a job's result goes, and the UI to wake when it gets there.
#[derive(Clone)]
struct Reply {
    events: Sender<Event>,
    ctx: egui::Context,
}

impl Reply {
    fn send(&self, event: Event) {
        // The UI going away first only means nobody waits for this result.
        let _ = self.events.send(event);
        self.ctx.request_repaint();
    }
}

/// The UI's handle on its background threads.
pub(crate) struct Worker {
    jobs: Sender<(Job, Reply)>,
    chats: Sender<(ChatJob, Reply)>,
    events: Receiver<Event>,
    sender: Sender<Event>,
    environment: Arc<Environment>,
    dialogs: Arc<dyn FileDialogs>,
}

impl Worker {
    pub fn new(environment: Environment, dialogs: Arc<dyn FileDialogs>) -> Self {
        let (jobs, queue) = channel::<(Job, Reply)>();
        let (sender, events) = channel();
        let environment = Arc::new(environment);
        let shared = Arc::clone(&environment);
        spawn("scar-retriever", move || {
            for (job, reply) in queue {
                reply.send(run(job, &shared));
            }
        });
        let (chats, questions) = channel::<(ChatJob, Reply)>();
        let shared = Arc::clone(&environment);
        spawn("scar-answerer", move || {
            // The chat model, loaded on the first question and kept for the next ones.
            let mut loaded: Option<(String, LocalModel)> = None;
            for (job, reply) in questions {
                match job {
                    ChatJob::Answer(job) => {
                        let id = job.id;
                        let result = answer(*job, &shared, &mut loaded, &reply);
                        reply.send(Event::Answered { id, result });
                    }
                    ChatJob::Rewrite(job) => {
                        let result =
                            chat_model(&job.model, &shared, &mut loaded).and_then(|model| {
                                Ok(standalone_question(model, &job.earlier, &job.question)?)
                            });
                        reply.send(Event::Rewritten { id: job.id, result });
                    }
                }
            }
        });
        Self {
            jobs,
            chats,
            events,
            sender,
            environment,
            dialogs,
        }
    }

    pub fn environment(&self) -> &Environment {
        &self.environment
    }

    /// The results that arrived since the last call.
    pub fn events(&self) -> impl Iterator<Item = Event> + '_ {
        self.events.try_iter()
    }

    pub fn open(&self, ctx: &egui::Context, location: Location) {
        self.submit(ctx, Job::Open(location));
    }

    pub fn prepare(&self, ctx: &egui::Context, retriever: Arc<AnyRetriever>, wish: Wish) {
        self.submit(ctx, Job::Prepare(retriever, wish));
    }

    /// Answers from a report on the answer thread, streaming its text back.
    pub fn answer(&self, ctx: &egui::Context, job: AnswerJob) {
        // As for `submit`: the thread outlives the sender unless it panicked.
        let _ = self
            .chats
            .send((ChatJob::Answer(Box::new(job)), self.reply(ctx)));
    }

    /// Rewrites a follow-up on the answer thread, with the chat model that answers.
    pub fn rewrite(&self, ctx: &egui::Context, job: RewriteJob) {
        let _ = self.chats.send((ChatJob::Rewrite(job), self.reply(ctx)));
    }

    fn submit(&self, ctx: &egui::Context, job: Job) {
        // The thread lives as long as the sender; sending fails only if it panicked.
        let _ = self.jobs.send((job, self.reply(ctx)));
    }

    /// Indexes `sources` into `dir` on its own thread, so that questions can still be asked.
    pub fn index(
        &self,
        ctx: &egui::Context,
        dir: PathBuf,
        sources: Vec<PathBuf>,
        cancel: Arc<AtomicBool>,
    ) {
        let reply = self.reply(ctx);
        let environment = Arc::clone(&self.environment);
        spawn("scar-indexer", move || {
            let result = index_folder(&environment, &dir, &sources, &cancel, &reply);
            reply.send(Event::Indexed {
                dir,
                sources,
                result,
            });
        });
    }

    /// Shows a file dialog; it blocks its own thread, never the UI.
    pub fn pick(&self, ctx: &egui::Context, pick: Pick) {
        let (reply, dialogs) = (self.reply(ctx), Arc::clone(&self.dialogs));
        spawn("scar-dialog", move || {
            let path = match pick {
                Pick::FolderToIndex => dialogs.pick_folder("Add a folder to the library"),
                Pick::ExistingIndex => dialogs.pick_folder("Open an index folder"),
                Pick::ExportPath => dialogs.pick_save_path("scar-search.json"),
            };
            if let Some(path) = path {
                reply.send(Event::Picked(pick, path));
            }
        });
    }

    /// Watches `sources` (indexed into `dir`) on its own thread until `stop` is set, reporting
    /// each burst of changes.
    pub fn watch(
        &self,
        ctx: &egui::Context,
        dir: PathBuf,
        sources: Vec<PathBuf>,
        stop: Arc<AtomicBool>,
    ) {
        let reply = self.reply(ctx);
        spawn("scar-watch", move || {
            match FolderWatch::new(&sources, &dir) {
                Ok(mut watch) => {
                    while watch.next_burst(&stop).is_some() {
                        reply.send(Event::SourcesChanged(dir.clone()));
                    }
                }
                Err(error) => reply.send(Event::WatchFailed(error.into())),
            }
        });
    }

    /// Opens `path` in the system's viewer, at `page` if it has pages, on its own thread: a
    /// viewer may take its time.
    pub fn open_path(&self, ctx: &egui::Context, path: PathBuf, page: Option<u32>) {
        let (reply, dialogs) = (self.reply(ctx), Arc::clone(&self.dialogs));
        spawn("scar-open", move || {
            if let Err(error) = dialogs.open_path(&path, page) {
                reply.send(Event::OpenFailed { path, error });
            }
        });
    }

    fn reply(&self, ctx: &egui::Context) -> Reply {
        Reply {
            events: self.sender.clone(),
            ctx: ctx.clone(),
        }
    }
}

fn spawn(name: &str, work: impl FnOnce() + Send + 'static) {
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(work)
        .expect("the system refused to start a thread");
}

fn run(job: Job, environment: &Environment) -> Event {
    match job {
        Job::Open(location) => {
            let result = open_retriever(&location, environment).and_then(|retriever| {
                let documents = retriever.store().documents()?;
                Ok(Opened {
                    retriever: Arc::new(retriever),
                    documents,
                })
            });
            // A store lists no files: its writers' own indexes keep those.
            let skipped = location.folder().map_or(Ok(Vec::new()), |dir| {
                scar_index::skipped_files(dir)
                    .map_err(|error| scar_core::ErrorChain(&error).to_string())
            });
            Event::Opened {
                location,
                result,
                skipped,
            }
        }
        Job::Prepare(retriever, wish) => {
            let result = find(&retriever, &wish).map(Box::new);
            Event::Prepared { wish, result }
        }
    }
}

/// The seeds `wish` asks for, and the documents they are in.
fn find(retriever: &AnyRetriever, wish: &Wish) -> Result<Found, UiError> {
    let prepared = retriever.prepare(&wish.query, wish.first_stage, wish.k)?;
    let neighbourhood = retriever.neighbourhood(&prepared)?;
    Ok(Found {
        prepared,
        neighbourhood,
    })
}

/// The index or store at `location` with its model, and the reranker the environment names.
fn open_retriever(location: &Location, environment: &Environment) -> Result<AnyRetriever, UiError> {
    let store: Box<dyn ChunkStore> = match location {
        Location::Folder(dir) => Box::new(Index::open(dir)?),
        Location::Store(url) => Box::new(PgStore::open(url)?),
    };
    let locator = ModelLocator::from_env(&environment.models_dir);
    let retriever = Retriever::open_store(store, &locator, &environment.embed_options())?;
    let embed = environment.embed_options();
    let sources = RerankerModels {
        models_dir: &environment.models_dir,
        cross_encoder: &environment.reranker,
        llm: DEFAULT_LLM,
        embed: &embed,
    };
    Ok(
        match environment
            .rerank
            .open(retriever.shared_embedder(), &sources)?
        {
            Some(reranker) => retriever.with_reranker(reranker),
            None => retriever,
        },
    )
}

/// The chat model `name`, loaded unless it is the one loaded.
fn chat_model<'m>(
    name: &str,
    environment: &Environment,
    loaded: &'m mut Option<(String, LocalModel)>,
) -> Result<&'m mut LocalModel, UiError> {
    if loaded
        .as_ref()
        .is_none_or(|(loaded_name, _)| loaded_name != name)
    {
        // Free the old model before loading the next.
        *loaded = None;
        let path = LlmLocator::from_env(&environment.models_dir).locate(name)?;
        let options = LoadOptions {
            device: environment.device,
            requantize: true,
        };
        let model = LocalModel::load(&path, &options)?;
        return Ok(&mut loaded.insert((name.to_owned(), model)).1);
    }
    let Some((_, model)) = loaded.as_mut() else {
        unreachable!("the model named is loaded");
    };
    Ok(model)
}

/// Generates with `job.model`, sending each piece of text as it comes and stopping once
/// `job.cancel` is set.
fn answer(
    job: AnswerJob,
    environment: &Environment,
    loaded: &mut Option<(String, LocalModel)>,
    reply: &Reply,
) -> Result<Box<AnswerReport>, UiError> {
    let model = chat_model(&job.model, environment, loaded)?;
    let on_text = &mut |piece: &str| {
        if job.cancel.load(Ordering::Relaxed) {
            return ControlFlow::Break(());
        }
        reply.send(Event::AnswerText {
            id: job.id,
            piece: piece.to_owned(),
        });
        ControlFlow::Continue(())
    };
    let report = job
        .question
        .answer(model, &job.retriever, &job.params, on_text)?;
    Ok(Box::new(report))
}

/// Indexes with the model the index was built with, or the environment's model for a new one.
fn index_folder(
    environment: &Environment,
    dir: &std::path::Path,
    sources: &[PathBuf],
    cancel: &AtomicBool,
    reply: &Reply,
) -> Result<IndexReport, UiError> {
    // An index a stopped rebuild left aside is put back before its model is read.
    finish_interrupted_swap(dir)?;
    let existing = Index::open(dir).ok();
    let model = indexing_model(
        None,
        existing.as_ref().map(Index::manifest),
        &environment.model,
    );
    let files = ModelLocator::from_env(&environment.models_dir).locate(model)?;
    drop(existing);
    let embedder = Embedder::load(&files, &environment.embed_options())?;
    let report = index_paths(
        dir,
        sources,
        &embedder,
        &IndexOptions::default(),
        &mut |progress| reply.send(Event::Progress(progress.clone())),
        cancel,
    )?;
    Ok(report)
}
