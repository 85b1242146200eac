//! SCAR served to other tools: an HTTP API ([`http`]) and a Model Context Protocol server over
//! stdio ([`mcp`]), both over one [`Library`] of indexes whose models load once.
//!
//! A search returns the same `scar.search/2` report as `scar search --json`, ledger included; a
//! question the same `scar.answer/3` report as `scar ask --json`. Index folders are served as
//! of their last commit, and a commit made while serving is picked up by the next request; a
//! PostgreSQL store ([`Source::Postgres`]) is read as it is.
//!
//! ```no_run
//! use std::sync::Arc;
//! use scar_embed::{DeviceChoice, Precision};
//! use scar_serve::{Library, LibraryOptions, Source, http};
//!
//! let options = LibraryOptions {
//!     models_dir: "models".into(),
//!     device: DeviceChoice::Auto,
//!     precision: Precision::Auto,
//!     llm: scar_answer::DEFAULT_LLM.to_owned(),
//!     rerank: scar_answer::Reranking::None,
//!     reranker: scar_answer::DEFAULT_CROSS_ENCODER.to_owned(),
//! };
//! let library = Arc::new(Library::open(&[Source::Folder("my-index".into())], options)?);
//! let router = http::router(library, &http::HttpOptions::default());
//! tokio::runtime::Runtime::new()?.block_on(async {
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:8765").await?;
//!     let connections = http::Connections::default();
//!     http::serve(listener, router, &connections, std::future::pending()).await
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
pub mod http;
mod library;
pub mod mcp;
mod request;

use std::ops::ControlFlow;

use scar_answer::{AnswerReport, GenerationParams, Question};
use scar_retrieve::SearchReport;

pub use error::{Result, ServeError};
pub use library::{IndexSummary, Library, LibraryOptions, ServedRetriever, Source};
pub use request::{
    AskRequest, MAX_ANSWER_TOKENS, MAX_K, MAX_QUESTION_CHARS, Search, SearchRequest,
};

/// A question searched on an index, ready to answer.
#[derive(Debug, Clone)]
pub struct Searched {
    /// The policy's report and static ±1's from the same seeds.
    pub question: Question,
    /// The index and model the search ran on, which find each answer sentence's source.
    pub retriever: std::sync::Arc<ServedRetriever>,
}

impl Library {
    /// Runs a checked search on its index, as of the index's last commit.
    pub fn search(&self, search: &Search) -> Result<SearchReport> {
        let retriever = self.retriever(search.index.as_deref())?;
        let prepared = retriever.prepare(&search.question, search.first_stage, search.k)?;
        Ok(retriever.expand(&prepared, &search.options)?)
    }

    /// Runs a checked search and static ±1 on the same seeds.
    pub fn search_for_answer(&self, search: &Search) -> Result<Searched> {
        let retriever = self.retriever(search.index.as_deref())?;
        let prepared = retriever.prepare(&search.question, search.first_stage, search.k)?;
        let question = Question::search(&retriever, &prepared, &search.options)?;
        Ok(Searched {
            question,
            retriever,
        })
    }

    /// Answers from a search's context with the chat model, passing each piece of text to
    /// `on_text` as it comes (`Break` stops the answer).
    pub fn answer(
        &self,
        searched: Searched,
        params: &GenerationParams,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<AnswerReport> {
        let Searched {
            question,
            retriever,
        } = searched;
        let report = self
            .with_answerer(|generator| question.answer(generator, &retriever, params, on_text))??;
        Ok(report)
    }
}
