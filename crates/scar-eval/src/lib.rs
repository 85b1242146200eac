//! Retrieval evaluation in the SCAR paper's terms, on LegalBench-RAG style benchmarks.
//!
//! A benchmark ([`Benchmark`]) lists questions with their evidence as character spans of
//! corpus files. [`resolve`] finds the files and checks the spans; [`evaluate`] prepares every
//! question once per first stage ([`scar_retrieve::Retriever::prepare`], or
//! [`prepare_within`](scar_retrieve::Retriever::prepare_within) for [`Scope::Document`]) and
//! runs every policy ([`default_policies`]) and every sweep setting on those same seeds through
//! [`scar_policy::expand`], so that differences between policies are differences of expansion
//! only. The [`EvalReport`] holds, per first stage, policy and group (boundary-fragmented,
//! atomic, all), the means of recall, chunks, chunk efficiency, context tokens and
//! LegalBench-RAG span precision and recall ([`Gold`], [`score`] and [`aggregate`] define
//! each), paired bootstraps of the compared policies ([`paired_bootstrap`]), the sweeps and
//! every test's scores. It renders as markdown ([`EvalReport::to_markdown`]) and as a PNG
//! ([`plot_recall_vs_chunks`]); [`write_report`] writes its files.
//!
//! The metrics work on plain data, so they can be checked by hand:
//!
//! ```
//! use scar_core::ChunkId;
//! use scar_eval::{ChunkExtent, Gold, Group, score};
//!
//! let chunk = |id, chars| ChunkExtent { id: ChunkId(id), document: 0, chars };
//! let chunks = [chunk(0, 0..100), chunk(1, 100..200), chunk(2, 200..300)];
//! // The evidence, characters 80..120, straddles the cut between chunks 0 and 1.
//! let gold = Gold::new([(0, 80..120)], &chunks);
//! assert_eq!(gold.group(), Some(Group::Boundary));
//!
//! // A context holding chunk 0 only: half the gold chunks; 20 of its 100 characters are
//! // gold (precision 0.2), and it holds 20 of the 40 gold characters (recall 0.5).
//! let result = score(&gold, &chunks[..1], 25);
//! assert_eq!((result.recall, result.chunks, result.tokens), (0.5, 1, 25));
//! assert_eq!((result.span_precision, result.span_recall), (0.2, 0.5));
//! ```
//!
//! A whole run:
//!
//! ```no_run
//! use scar_embed::{EmbedOptions, ModelLocator};
//! use scar_eval::{Benchmark, EvalOptions, evaluate, resolve};
//! use scar_retrieve::Retriever;
//!
//! let path = std::path::Path::new("assets/benchmarks/rfc9293.json");
//! let benchmark = Benchmark::load(path)?;
//! let resolved = resolve(&benchmark, path, "../shared/data/corpora".as_ref(), None)?;
//! // An index holding resolved.documents, e.g. built with `scar index`.
//! let retriever = Retriever::open("my-index", &ModelLocator::from_env("models"), &EmbedOptions::default())?;
//! let report = evaluate(&retriever, &resolved, &EvalOptions::default(), &mut |p| {
//!     eprintln!("{}/{}", p.done, p.total);
//! })?;
//! println!("{}", report.summary_markdown());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod answers;
mod benchmark;
mod error;
mod markdown;
mod metrics;
mod neighbours;
mod options;
mod plot;
mod report;
mod run;
mod seeds;
mod signals;
mod stats;
mod write;

#[cfg(test)]
mod hand_computed;

pub use answers::{
    ANSWERS_SCHEMA_VERSION, AnswerEvalOptions, AnswerEvalReport, AnswerRecord, AnswerSummary,
    evaluate_answers,
};
pub use benchmark::{Benchmark, GoldSpan, Resolved, ResolvedTest, Snippet, Test, resolve};
pub use error::{EvalError, Result};
pub use metrics::{ChunkExtent, Gold, Group, GroupMetrics, TestScore, aggregate, score};
pub use neighbours::{NeighbourRow, SEAM_WORDS};
pub use options::{
    EVIDENCE, EvalOptions, NamedPolicy, SCAR_1, SCAR_1_NO_PENALTY, STATIC_1, Scope,
    default_policies,
};
pub use plot::{LEGEND, plot_recall_vs_chunks, plot_roc};
pub use report::{
    Comparison, DataSummary, DepthPoint, EvalReport, EvalSettings, PolicyResult, SCHEMA_VERSION,
    StageResult, SweepPoint, TestRecord,
};
pub use run::{Progress, evaluate};
pub use seeds::{JudgeTime, SeedJudge, SeedReport, SeedRow, SeedSignal};
pub use signals::{Quartiles, SIGNALS, SignalReport, SignalSummary, auc, roc, summarize};
pub use stats::{DEFAULT_SEED, PairedBootstrap, SplitMix64, paired_bootstrap};
pub use write::write_report;
