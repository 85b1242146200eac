//! Retrieval evaluation in the SCAR paper's terms, on LegalBench-RAG style benchmarks.
//!
//! A benchmark ([`Benchmark`]) lists questions with their evidence as character spans of
//! corpus files. [`resolve`] finds the files and checks the spans; [`evaluate`] prepares every
//! question once per first stage ([`scar_retrieve::Retriever::prepare`]) and runs every policy
//! (top-k, static ±1 and ±2, parent, SCAR ±1 and ±2, SCAR ±1 with λ = 0) and every λ × γ sweep
//! setting on those same seeds, so that differences between policies are differences of
//! expansion only. The [`EvalReport`] holds, per first stage, policy and group
//! (boundary-fragmented, atomic, all), the means of recall, chunks, chunk efficiency, context
//! tokens and LegalBench-RAG span precision and recall ([`metrics`] defines each), a paired
//! bootstrap of SCAR ±1 against static ±1 ([`stats`]), the sweep and every test's scores. It
//! renders as markdown ([`EvalReport::to_markdown`]) and as a PNG
//! ([`plot_recall_vs_chunks`]).
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
//! use scar_embed::{DeviceChoice, ModelLocator};
//! use scar_eval::{Benchmark, EvalOptions, evaluate, resolve};
//! use scar_retrieve::Retriever;
//!
//! let path = std::path::Path::new("assets/benchmarks/rfc9293.json");
//! let benchmark = Benchmark::load(path)?;
//! let resolved = resolve(&benchmark, path, "../shared/data/corpora".as_ref(), None)?;
//! // An index holding resolved.documents, e.g. built with `scar index`.
//! let retriever = Retriever::open("my-index", &ModelLocator::from_env("models"), DeviceChoice::Auto)?;
//! let report = evaluate(&retriever, &resolved, &EvalOptions::default(), &mut |p| {
//!     eprintln!("{}/{}", p.done, p.total);
//! })?;
//! println!("{}", report.summary_markdown());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod benchmark;
mod error;
pub mod metrics;
mod neighbours;
mod plot;
mod report;
mod run;
mod signals;
pub mod stats;

#[cfg(test)]
mod hand_computed;

pub use benchmark::{Benchmark, GoldSpan, Resolved, ResolvedTest, Snippet, Test, resolve};
pub use error::{EvalError, Result};
pub use metrics::{ChunkExtent, Gold, Group, GroupMetrics, TestScore, aggregate, score};
pub use neighbours::{NeighbourRow, SEAM_WORDS};
pub use plot::{LEGEND, plot_recall_vs_chunks, plot_roc};
pub use report::{
    Comparison, DataSummary, DepthPoint, EvalReport, EvalSettings, PolicyResult, SCHEMA_VERSION,
    StageResult, SweepPoint, TestRecord,
};
pub use run::{
    EVIDENCE, EvalOptions, NamedPolicy, Progress, SCAR_1, SCAR_1_NO_PENALTY, STATIC_1, Scope,
    default_policies, evaluate,
};
pub use signals::{SIGNALS, SignalReport, SignalSummary, auc, roc, summarize};
pub use stats::{PairedBootstrap, SplitMix64, paired_bootstrap};

/// Writes `report.json`, `report.md` and `recall_vs_chunks.png` into `dir` (created if
/// needed), and with a neighbour table `neighbours.jsonl` and `roc.png` (the first stage's
/// signals); returns the paths written.
pub fn write_report(report: &EvalReport, dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    fs_err::create_dir_all(dir)?;
    let mut paths = vec![
        dir.join("report.json"),
        dir.join("report.md"),
        dir.join("recall_vs_chunks.png"),
    ];
    fs_err::write(&paths[0], serde_json::to_string_pretty(report)? + "\n")?;
    fs_err::write(&paths[1], report.to_markdown())?;
    plot_recall_vs_chunks(report, &paths[2])?;
    let rows: Vec<&NeighbourRow> = report.stages.iter().flat_map(|s| &s.neighbours).collect();
    if !rows.is_empty() {
        let mut text = String::new();
        for row in rows {
            text += &serde_json::to_string(row)?;
            text.push('\n');
        }
        let table = dir.join("neighbours.jsonl");
        fs_err::write(&table, text)?;
        paths.push(table);
    }
    if let Some((stage, signals)) = report
        .stages
        .first()
        .and_then(|stage| Some((stage, summarize(&stage.neighbours)?)))
    {
        let roc = dir.join("roc.png");
        plot_roc(stage, &signals, &roc)?;
        paths.push(roc);
    }
    Ok(paths)
}
