//! `scar search "question"`: the context, and every decision with its scores.

use std::process::ExitCode;

use anyhow::Result;
use console::{Style, style};
use scar_embed::ModelLocator;
use scar_policy::{NeighbourRecord, Options, Outcome, Policy, Side};
use scar_retrieve::{Retriever, SearchReport};

use crate::settings::Settings;

pub fn run(settings: &Settings, query: &str, json: bool, full: bool) -> Result<ExitCode> {
    let options = settings.policy()?;
    let locator = ModelLocator::from_env(&settings.models_dir.value);
    let retriever = Retriever::open(&settings.index.value, &locator, settings.device.value)?;
    let prepared = retriever.prepare(query, settings.first_stage.value, settings.k.value)?;
    let report = retriever.expand(&prepared, &options)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    // What static ±1 would have taken from the same seeds: the saving SCAR is about.
    let baseline = retriever.expand(
        &prepared,
        &Options::new(Policy::StaticWindow { window: 1 })?,
    )?;
    print_report(retriever.index(), &report, &baseline, full);
    Ok(ExitCode::SUCCESS)
}

fn print_report(
    index: &scar_index::Index,
    report: &SearchReport,
    baseline: &SearchReport,
    full: bool,
) {
    let ledger = &report.ledger;
    println!(
        "{} {}\n{}",
        style("question:").bold(),
        report.query,
        style(format!(
            "{} first stage, k = {}, {}",
            report.first_stage, report.k, ledger.policy
        ))
        .dim()
    );
    let place = |id| {
        index.chunk(id).map_or_else(
            || format!("chunk {id}"),
            |c| {
                format!(
                    "{} ¶{}",
                    short(&c.document.path.to_string_lossy()),
                    c.ordinal
                )
            },
        )
    };
    println!("\n{}", style("decisions").bold().underlined());
    for seed in &ledger.seeds {
        let bar = seed
            .bar
            .map_or_else(String::new, |b| format!("  bar γ·cos = {b:.3}"));
        let status = if seed.in_context {
            ""
        } else {
            "  (over budget)"
        };
        println!(
            "{} {}  cos(q,c) = {:.3}{bar}{status}",
            style(format!("seed #{}", seed.rank)).cyan().bold(),
            place(seed.id),
            seed.query_cos
        );
        for neighbour in &seed.neighbours {
            println!("    {}", neighbour_line(neighbour, &place));
        }
    }
    println!(
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
            format!("  {}", chunk.heading_path)
        };
        println!(
            "[{}] {} ¶{} ({role}, {} tokens){}",
            n + 1,
            short(&chunk.document),
            chunk.ordinal,
            chunk.tokens,
            style(heading).dim()
        );
        let text = if full {
            chunk.text.clone()
        } else {
            preview(&chunk.text)
        };
        for line in text.lines() {
            println!("    {line}");
        }
    }
    println!("\n{}", comparison(report, baseline));
    let t = &report.timings;
    println!(
        "{}",
        style(format!(
            "embed {:.1} ms, first stage {:.1} ms, policy {:.3} ms",
            t.embed_ms, t.first_stage_ms, t.policy_ms
        ))
        .dim()
    );
}

/// The context's size beside static ±1's on the same seeds: what SCAR saved.
pub(crate) fn comparison(report: &SearchReport, baseline: &SearchReport) -> String {
    let (ours, theirs) = (&report.ledger, &baseline.ledger);
    let saved = match theirs.context.len().saturating_sub(ours.context.len()) {
        1 => "1 chunk saved".to_owned(),
        n => format!("{n} chunks saved"),
    };
    format!(
        "{} chunks, {} tokens; static ±1 on the same seeds: {} chunks, {} tokens ({saved})",
        ours.context.len(),
        ours.context_tokens,
        theirs.context.len(),
        theirs.context_tokens,
    )
}

fn neighbour_line(n: &NeighbourRecord, place: &dyn Fn(scar_core::ChunkId) -> String) -> String {
    let arrow = match n.side {
        Side::Previous => "←",
        Side::Next => "→",
    };
    let (label, colour): (&str, Style) = match n.outcome {
        Outcome::Accepted => ("✓ accepted", Style::new().green().bold()),
        Outcome::Rejected => ("✗ rejected", Style::new().red().bold()),
        Outcome::NotReached => ("· not reached", Style::new().dim()),
        Outcome::AlreadyInContext => ("= already in context", Style::new().dim()),
        Outcome::DocumentEdge => ("| document edge", Style::new().dim()),
        Outcome::OverBudget => ("$ over budget", Style::new().yellow()),
    };
    let target =
        n.id.map_or_else(String::new, |id| format!(" {}", place(id)));
    let mut scores = Vec::new();
    if let Some(q) = n.query_cos {
        scores.push(format!("cos(q,n) = {q:.3}"));
    }
    if let Some(b) = n.penalty {
        scores.push(format!("b = {b:.3}"));
    }
    if let Some(s) = n.score {
        scores.push(format!("S = {s:.3}"));
    }
    if let Some(m) = n.margin {
        scores.push(format!("margin {m:+.3}"));
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
