//! The indexes served, each with its model loaded once, and the chat model that answers.
//!
//! An index folder is searched as of its last commit: when `scar index` commits while the
//! server runs, the next request opens the index again (keeping the loaded model) and sees what
//! the commit added; until then, and if opening it again fails, requests are answered from the
//! state they were answered from before. A PostgreSQL store is read as it is at each request.

use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex, RwLock};

use scar_answer::{Generator, LlmLocator, LoadOptions, LocalModel, RerankerModels, Reranking};
use scar_embed::{DeviceChoice, EmbedOptions, Embedder, ModelLocator, Precision};
use scar_index::Index;
use scar_retrieve::{ChunkStore, Rerank, Retriever};
use serde::Serialize;

use crate::{Result, ServeError};

/// Where the models come from, and which chat model answers.
#[derive(Debug, Clone)]
pub struct LibraryOptions {
    /// The folder of installed models.
    pub models_dir: PathBuf,
    /// Where the models run.
    pub device: DeviceChoice,
    /// The number format the embedding models compute in.
    pub precision: Precision,
    /// The chat model for `ask`: a GGUF file, a folder or a known name (see
    /// [`LlmLocator`]); loaded on the first question.
    pub llm: String,
    /// The judge that re-scores each search's first-stage candidates, if any; loaded when the
    /// library opens.
    pub rerank: Reranking,
    /// The cross-encoder for [`Reranking::CrossEncoder`]: a hub id or a folder.
    pub reranker: String,
}

/// Where a served index's chunks are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An index folder.
    Folder(PathBuf),
    /// A PostgreSQL store, by its URL.
    Postgres(String),
}

impl Source {
    fn open(&self) -> Result<Box<dyn ChunkStore>> {
        Ok(match self {
            Self::Folder(dir) => Box::new(Index::open(dir).map_err(|e| ServeError::open(self, e))?),
            Self::Postgres(url) => {
                Box::new(scar_postgres::PgStore::open(url).map_err(|e| ServeError::open(self, e))?)
            }
        })
    }

    /// What requests call it, before it is made unique: the folder's name, or the store's
    /// database.
    fn name(&self) -> String {
        match self {
            Self::Folder(dir) => dir.file_name().map(|n| n.to_string_lossy().into_owned()),
            Self::Postgres(url) => postgres::Config::from_str(url)
                .ok()
                .and_then(|config| config.get_dbname().map(str::to_owned)),
        }
        .unwrap_or_else(|| "index".to_owned())
    }
}

/// Where a source is, for a person: a folder, or a store's URL without its password.
impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Folder(dir) => write!(f, "{}", dir.display()),
            Self::Postgres(url) => write!(f, "{}", scar_postgres::redacted(url)),
        }
    }
}

/// A served index's retriever, over whichever store it is.
pub type ServedRetriever = Retriever<Box<dyn ChunkStore>>;

/// One served index.
struct Served {
    name: String,
    source: Source,
    /// The retriever of the last commit seen.
    current: RwLock<Arc<ServedRetriever>>,
    /// Held while the index is opened again, so that one request does it, not all of them.
    reopening: Mutex<()>,
}

/// The chat model, loaded on first use and then shared; one answer at a time.
type Answerer = Mutex<Option<Box<dyn Generator>>>;

/// The indexes served, by name.
pub struct Library {
    indexes: Vec<Served>,
    options: LibraryOptions,
    answerer: Answerer,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library")
            .field("indexes", &self.names())
            .finish_non_exhaustive()
    }
}

/// What `GET /v1/indexes` and the MCP resources say of an index.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IndexSummary {
    /// The name requests use.
    pub name: String,
    /// Its folder, or its store's URL (no password).
    pub dir: String,
    /// The embedding model it was built with.
    pub model: String,
    /// Documents and chunks as of the commit served.
    pub documents: usize,
    /// See `documents`.
    pub chunks: usize,
    /// The documents' paths.
    pub paths: Vec<String>,
}

impl Library {
    /// Opens the indexes in `sources`, each named after its folder or database (with `-2`,
    /// `-3`… when two share a name), loading each embedding model once.
    pub fn open(sources: &[Source], options: LibraryOptions) -> Result<Self> {
        if sources.is_empty() {
            return Err(ServeError::NoIndex);
        }
        let locator = ModelLocator::from_env(&options.models_dir);
        let mut models: HashMap<String, Arc<Embedder>> = HashMap::new();
        // One judge for all the indexes, or one per embedding model for the sentence judge,
        // which embeds with it.
        let mut rerankers: HashMap<String, Option<Arc<dyn Rerank>>> = HashMap::new();
        let mut indexes: Vec<Served> = Vec::new();
        for source in sources {
            let store = source.open()?;
            let model = store.model();
            let embedder = if let Some(embedder) = models.get(&model.id) {
                Arc::clone(embedder)
            } else {
                let files = locator
                    .locate(&model.id)
                    .map_err(|e| ServeError::open(source, e))?;
                let embed_options = EmbedOptions::new(options.device, options.precision)
                    .with_instructions_of(model);
                let embedder = Arc::new(
                    Embedder::load(&files, &embed_options)
                        .map_err(|e| ServeError::open(source, e))?,
                );
                models.insert(model.id.clone(), Arc::clone(&embedder));
                embedder
            };
            let judge_key = if options.rerank == Reranking::Sentence {
                model.id.clone()
            } else {
                String::new()
            };
            let reranker = if let Some(reranker) = rerankers.get(&judge_key) {
                reranker.clone()
            } else {
                let embed = EmbedOptions::new(options.device, options.precision);
                let sources = RerankerModels {
                    models_dir: &options.models_dir,
                    cross_encoder: &options.reranker,
                    llm: &options.llm,
                    embed: &embed,
                };
                let reranker = options
                    .rerank
                    .open(Arc::clone(&embedder), &sources)
                    .map_err(|e| ServeError::open(source, e))?;
                rerankers.insert(judge_key, reranker.clone());
                reranker
            };
            let mut retriever =
                Retriever::with_store(embedder, store).map_err(|e| ServeError::open(source, e))?;
            if let Some(reranker) = reranker {
                retriever = retriever.with_reranker(reranker);
            }
            let name = unique_name(&source.name(), &indexes);
            indexes.push(Served {
                name,
                source: source.clone(),
                current: RwLock::new(Arc::new(retriever)),
                reopening: Mutex::new(()),
            });
        }
        Ok(Self {
            indexes,
            options,
            answerer: Mutex::new(None),
        })
    }

    /// The names of the indexes, in the order they were given.
    #[must_use]
    pub fn names(&self) -> Vec<&str> {
        self.indexes.iter().map(|i| i.name.as_str()).collect()
    }

    /// The retriever of the index called `name` (the first index when `None`), as of its last
    /// commit.
    pub fn retriever(&self, name: Option<&str>) -> Result<Arc<ServedRetriever>> {
        let served = match name {
            None => &self.indexes[0],
            Some(name) => self
                .indexes
                .iter()
                .find(|i| i.name == name)
                .ok_or_else(|| ServeError::UnknownIndex {
                    name: name.to_owned(),
                    known: self.names().join(", "),
                })?,
        };
        let retriever = served.current();
        // A data file cut on disk would take the process down at the first read of its pages.
        if let Some(index) = retriever.store().folder_index() {
            index
                .check_files()
                .map_err(scar_retrieve::RetrieveError::from)?;
        }
        Ok(retriever)
    }

    /// What each index holds, as of its last commit.
    pub fn summaries(&self) -> Result<Vec<IndexSummary>> {
        self.indexes
            .iter()
            .map(|served| {
                let retriever = served.current();
                let store = retriever.store();
                let documents = store.documents()?;
                Ok(IndexSummary {
                    name: served.name.clone(),
                    dir: served.source.to_string(),
                    model: store.model().id.clone(),
                    documents: documents.len(),
                    chunks: store.len(),
                    paths: documents
                        .iter()
                        .map(|d| d.path.display().to_string())
                        .collect(),
                })
            })
            .collect()
    }

    /// Runs `work` with the chat model, loading it first if no question has been answered yet.
    /// Answers are generated one at a time.
    pub fn with_answerer<T>(&self, work: impl FnOnce(&mut dyn Generator) -> T) -> Result<T> {
        let mut answerer = self
            .answerer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut generator = match answerer.take() {
            Some(generator) => generator,
            None => self.load_answerer()?,
        };
        let result = work(generator.as_mut());
        *answerer = Some(generator);
        Ok(result)
    }

    fn load_answerer(&self) -> Result<Box<dyn Generator>> {
        let path = LlmLocator::from_env(&self.options.models_dir)
            .locate(&self.options.llm)
            .map_err(ServeError::ChatModel)?;
        let options = LoadOptions {
            device: self.options.device,
            ..LoadOptions::default()
        };
        let model = LocalModel::load(&path, &options).map_err(ServeError::ChatModel)?;
        Ok(Box::new(model))
    }
}

impl Served {
    /// The retriever of the last commit: an index folder opened again first when a writer has
    /// committed since.
    fn current(&self) -> Arc<ServedRetriever> {
        let current = Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if is_current(&current) {
            return current;
        }
        let _one_at_a_time = self
            .reopening
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let latest = Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if is_current(&latest) {
            return latest;
        }
        // A commit that is being compacted may leave the folder unreadable for a moment: the
        // state served so far stays until it opens.
        match self.source.open().and_then(|store| Ok(latest.over(store)?)) {
            Ok(reopened) => {
                let reopened = Arc::new(reopened);
                *self
                    .current
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::clone(&reopened);
                reopened
            }
            Err(_) => latest,
        }
    }
}

/// Whether `retriever` reads its store as it is now: a store on a server always does, a folder
/// until a writer commits.
fn is_current(retriever: &ServedRetriever) -> bool {
    retriever
        .store()
        .folder_index()
        .is_none_or(Index::is_current)
}

/// `base`, made unique among `taken`.
fn unique_name(base: &str, taken: &[Served]) -> String {
    let base = base.to_owned();
    let free = |name: &str| taken.iter().all(|i| i.name != name);
    if free(&base) {
        return base;
    }
    // One more candidate than there are names taken: one of them is free.
    (2..=taken.len() + 2)
        .map(|n| format!("{base}-{n}"))
        .find(|name| free(name))
        .unwrap_or(base)
}
