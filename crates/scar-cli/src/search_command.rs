//! `scar search "question"`: the context, and every decision with its scores.

use std::process::ExitCode;

use anyhow::Result;
use console::{Style, style};
use scar_embed::ModelLocator;
use scar_index::Index;
use scar_policy::{NeighbourRecord, Outcome, Policy, Side};
use scar_retrieve::{ChunkStore, FirstStage, Retriever, SearchReport};

use crate::settings::{Settings, Source};
use crate::terminal::inert;

pub fn run(settings: &Settings, query: &str, json: bool, full: bool) -> Result<ExitCode> {
    let options = settings.policy()?;
    let retriever = open_retriever(settings)?;
    let prepared = retriever.prepare(query, settings.first_stage.value, settings.k.value)?;
    let report = retriever.expand(&prepared, &options)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    print_report(&report, full)?;
    Ok(ExitCode::SUCCESS)
}

/// The index folder, or the PostgreSQL store when one is set, with the model its chunks were
/// embedded with. A `--model` naming another is noted, not silently ignored: a store is
/// searched with its own model.
pub(crate) fn open_retriever(settings: &Settings) -> Result<Retriever<Box<dyn ChunkStore>>> {
    let store: Box<dyn ChunkStore> = match &settings.store.value {
        Some(url) => Box::new(scar_postgres::PgStore::open(url)?),
        None => Box::new(Index::open(&settings.index.value)?),
    };
    let locator = ModelLocator::from_env(&settings.models_dir.value);
    let mut retriever = Retriever::open_store(store, &locator, &settings.embed_options())?;
    if let Some(reranker) = settings.reranker(retriever.shared_embedder())? {
        retriever = retriever.with_reranker(reranker);
    }
    let built = &retriever.store().model().id;
    let asked = &settings.model.value;
    let same = built == asked
        || built.ends_with(&format!("/{asked}"))
        || asked.ends_with(&format!("/{built}"));
    if settings.model.source == Source::Flag && !same {
        eprintln!(
            "note: {} was built with {built}, so it is searched with it; --model {asked} applies \
             to new indexes",
            retriever.store().location()
        );
    }
    Ok(retriever)
}

/// How much BM25's rank counted, when the search fused it and it counted for less than a full
/// vote.
fn lexical_weight_line(report: &SearchReport) -> Option<String> {
    let ledger = &report.ledger;
    let fuses = report.first_stage == FirstStage::Hybrid
        || matches!(ledger.policy, Policy::Evidence { .. });
    (fuses && ledger.lexical_weight < 1.0).then(|| {
        format!(
            "BM25's rank counts {:.1}%: the share of the question's words the index holds",
            100.0 * ledger.lexical_weight
        )
    })
}

fn print_report(report: &SearchReport, full: bool) -> Result<()> {
    let ledger = &report.ledger;
    outln!(
        "{} {}\n{}",
        style("question:").bold(),
        inert(&report.query),
        style(format!(
            "{} first stage, k = {}, {}",
            report.first_stage, report.k, ledger.policy
        ))
        .dim()
    );
    if let Some(line) = lexical_weight_line(report) {
        outln!("{}", style(line).dim());
    }
    let place = |id| {
        report.place(id).map_or_else(
            || format!("chunk {id}"),
            |p| format!("{} {}", inert(short(&p.document)), inert(&p.place())),
        )
    };
    outln!("\n{}", style("decisions").bold().underlined());
    for seed in &ledger.seeds {
        let bar = match (seed.bar, seed.bar_rank) {
            (Some(b), Some(d)) => format!("  bar {b:.4} (ranked {d} in both lists)"),
            (Some(b), None) => format!("  bar γ·cos = {b:.3}"),
            (None, _) => String::new(),
        };
        let status = if seed.in_context {
            ""
        } else {
            "  (over budget)"
        };
        let judged = seed.judged.map_or_else(String::new, |j| {
            format!(
                "  reranker {:.3} (first stage #{})",
                j.score, j.first_stage_rank
            )
        });
        outln!(
            "{} {}  cos(q,c) = {:.3}{judged}{bar}{status}",
            style(format!("seed #{}", seed.rank)).cyan().bold(),
            place(seed.id),
            seed.query_cos
        );
        for neighbour in &seed.neighbours {
            outln!("    {}", neighbour_line(neighbour, ledger.policy, &place));
        }
    }
    outln!(
        "\n{}",
        style("context, in document order").bold().underlined()
    );
    for (n, chunk) in report.chunks.iter().enumerate() {
        let role = if chunk.seed {
            style("seed").cyan()
        } else {
            style("neighbour").green()
        };
        let heading = if chunk.heading_path.is_empty() {
            String::new()
        } else {
            format!("  {}", inert(&chunk.heading_path))
        };
        outln!(
            "[{}] {} {} ({role}, {} tokens){}",
            n + 1,
            inert(short(&chunk.document)),
            inert(&chunk.place()),
            chunk.tokens,
            style(heading).dim()
        );
        let text = if full {
            chunk.text.clone()
        } else {
            preview(&chunk.text)
        };
        for line in text.lines() {
            outln!("    {}", inert(line));
        }
    }
    outln!("\n{}", report.comparison());
    let t = &report.timings;
    outln!(
        "{}",
        style(format!(
            "embed {:.1} ms, first stage {:.1} ms, policy {:.3} ms",
            t.embed_ms, t.first_stage_ms, t.policy_ms
        ))
        .dim()
    );
    Ok(())
}

fn neighbour_line(
    n: &NeighbourRecord,
    policy: Policy,
    place: &dyn Fn(scar_core::ChunkId) -> String,
) -> String {
    let arrow = match n.side {
        Side::Previous => "←",
        Side::Next => "→",
    };
    let colour = match n.outcome {
        Outcome::Accepted => Style::new().green().bold(),
        Outcome::Rejected => Style::new().red().bold(),
        Outcome::OverBudget => Style::new().yellow(),
        Outcome::NotReached | Outcome::AlreadyInContext | Outcome::DocumentEdge => {
            Style::new().dim()
        }
    };
    let label = format!("{} {}", n.outcome.mark(), n.outcome.label());
    let target =
        n.id.map_or_else(String::new, |id| format!(" {}", place(id)));
    let rank = |r: Option<u32>| r.map_or_else(|| "–".to_owned(), |r| format!("#{r}"));
    let mut scores = Vec::new();
    if let Some(seam) = n.seam {
        scores.push(format!("cut: {}", seam.label()));
    }
    if let Some(q) = n.query_cos {
        scores.push(format!("cos(q,n) = {q:.3}"));
    }
    if let Some(b) = n.penalty {
        scores.push(format!("b = {b:.3}"));
    }
    if n.id.is_some() {
        scores.push(format!(
            "dense {} bm25 {}",
            rank(n.dense_rank),
            rank(n.lexical_rank)
        ));
    }
    // SCAR's scores are cosines; the evidence walk's are fused ranks, two orders smaller.
    let (name, digits) = match policy {
        Policy::Evidence { .. } => ("score", 4),
        _ => ("S", 3),
    };
    if let Some(s) = n.score {
        scores.push(format!("{name} = {s:.digits$}"));
    }
    if let Some(m) = n.margin {
        scores.push(format!("margin {m:+.digits$}"));
    }
    format!(
        "{arrow}{} {:<22}{target}  {}",
        n.distance,
        colour.apply_to(label),
        scores.join("  ")
    )
}

pub(crate) fn short(path: &str) -> &str {
    std::path::Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(path)
}

/// The first three lines of a chunk, each cut at 100 characters.
fn preview(text: &str) -> String {
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(3)
        .map(|l| {
            if l.chars().count() > 100 {
                format!("{}…", l.chars().take(100).collect::<String>())
            } else {
                l.to_owned()
            }
        })
        .collect();
    if text.lines().filter(|l| !l.trim().is_empty()).count() > 3 {
        lines.push("…".to_owned());
    }
    lines.join("\n")
}
