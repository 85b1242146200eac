//! The SCAR desktop app's UI: a library of indexes and stores, a question box, every expansion decision
//! with its scores, live policy controls, a seam map of each document, and an answer streamed
//! from a local chat model whose `[n]` citations open their chunks.
//!
//! This crate depends on egui only; a window (the `scar-app` binary, with eframe) hosts it and
//! supplies native file dialogs, and opens files in the system's viewer, through [`FileDialogs`]. Slow work (loading a model, embedding
//! a question, answering it, indexing a folder, a dialog) runs on worker threads that report
//! back through a channel and wake the UI with `request_repaint`, so the window never blocks.
//! Moving a policy control re-runs the policy on the question's cached seeds, embeddings and
//! rankings and its seeds' documents, read once ([`scar_retrieve::Retriever::expand_in`]), which
//! takes microseconds and reads nothing from the index or the PostgreSQL store.
//!
//! ```no_run
//! use std::path::{Path, PathBuf};
//! use scar_ui::{Environment, FileDialogs, ScarApp, Settings};
//!
//! struct NoDialogs;
//! impl FileDialogs for NoDialogs {
//!     fn pick_folder(&self, _title: &str) -> Option<PathBuf> { None }
//!     fn pick_save_path(&self, _file_name: &str) -> Option<PathBuf> { None }
//!     fn open_path(&self, _path: &Path, _page: Option<u32>) -> std::io::Result<()> { Ok(()) }
//! }
//!
//! let mut app = ScarApp::new(Settings::default(), Environment::default(), NoDialogs);
//! app.open_index("my-index");
//! app.ask("What does it cost to take my kayak on the ferry?");
//! // Each frame, inside the host's window:
//! # let ctx = egui::Context::default();
//! # let _ = ctx.run_ui(egui::RawInput::default(), |ui| {
//! app.ui(ui);
//! # });
//! ```

mod answer;
mod app;
mod controls;
mod conversation;
mod decisions;
mod error;
mod indexing;
mod library;
mod question;
mod seam_map;
mod settings;
mod watching;
mod worker;

use std::path::{Path, PathBuf};

pub use scar_answer::{DEFAULT_CROSS_ENCODER, Reranking};
pub use scar_embed::cpu::{UnknownIsa, max_isa};
pub use scar_embed::{DeviceChoice, Precision};

pub use app::ScarApp;
pub use error::{Result, UiError};
pub use settings::{AnswerSettings, Controls, Conversation, LibraryEntry, Location, Settings};

/// Where the app finds models and keeps the indexes it creates; not persisted, the host
/// decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    /// Installed models (`models/<name>/`), as `scar --models-dir`.
    pub models_dir: PathBuf,
    /// The model new indexes are built with; an existing index keeps its own.
    pub model: String,
    /// Where embedding runs.
    pub device: DeviceChoice,
    /// The number format embedding computes in.
    pub precision: Precision,
    /// The folder that holds the indexes of folders added in the app.
    pub library_dir: PathBuf,
    /// The judge that re-scores each question's first-stage candidates, if any (`llm` judges
    /// with the default chat model).
    pub rerank: Reranking,
    /// The cross-encoder for [`Reranking::CrossEncoder`]: a hub id or a folder.
    pub reranker: String,
}

/// The defaults of `scar`: `./models`, BAAI/bge-large-en-v1.5, the best device; new indexes in
/// `./scar-library`.
impl Default for Environment {
    fn default() -> Self {
        Self {
            models_dir: PathBuf::from("models"),
            model: "BAAI/bge-large-en-v1.5".to_owned(),
            device: DeviceChoice::Auto,
            precision: Precision::Auto,
            library_dir: PathBuf::from("scar-library"),
            rerank: Reranking::None,
            reranker: DEFAULT_CROSS_ENCODER.to_owned(),
        }
    }
}

impl Environment {
    /// How the embedding model is loaded: on the chosen device, in the chosen precision.
    #[must_use]
    pub fn embed_options(&self) -> scar_embed::EmbedOptions {
        scar_embed::EmbedOptions::new(self.device, self.precision)
    }
}

/// Native file dialogs, and the system's viewer, supplied by the window that hosts the UI. They
/// are called on a worker thread, so they may block until the user answers.
pub trait FileDialogs: Send + Sync + 'static {
    /// A folder, or `None` if the user cancelled.
    fn pick_folder(&self, title: &str) -> Option<PathBuf>;
    /// A file to write, proposing `file_name`; `None` if the user cancelled.
    fn pick_save_path(&self, file_name: &str) -> Option<PathBuf>;
    /// Opens `path` with the system's default application, at `page` (numbered from 1) where
    /// the viewer can be told one; a folder opens in the file manager.
    fn open_path(&self, path: &Path, page: Option<u32>) -> std::io::Result<()>;
}

/// The last part of a path, for labels; the whole path when it has none.
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}
