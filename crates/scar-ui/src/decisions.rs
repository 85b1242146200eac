//! The decisions view: every chunk the policy looked at, in document order, with what it
//! decided and the scores behind it; and the comparison with static ±1.

use std::collections::BTreeMap;

use egui::{Color32, RichText};
use scar_core::{ChunkId, Position};
use scar_index::Index;
use scar_policy::{NeighbourRecord, Outcome, Policy, SeedRecord, Side};
use scar_retrieve::SearchReport;

use crate::file_name;

/// Seeds: the first stage's picks.
pub(crate) const SEED: Color32 = Color32::from_rgb(66, 135, 245);
const ACCEPTED: Color32 = Color32::from_rgb(46, 170, 80);
const REJECTED: Color32 = Color32::from_rgb(225, 70, 70);
const OVER_BUDGET: Color32 = Color32::from_rgb(230, 160, 30);
const PASSED_OVER: Color32 = Color32::from_rgb(130, 130, 140);

/// An outcome's colour and its label; the label carries the meaning, the colour repeats it.
pub(crate) fn outcome_style(outcome: Outcome) -> (Color32, &'static str) {
    match outcome {
        Outcome::Accepted => (ACCEPTED, "✔ accepted"),
        Outcome::Rejected => (REJECTED, "✖ rejected"),
        Outcome::NotReached => (PASSED_OVER, "… not reached"),
        Outcome::AlreadyInContext => (PASSED_OVER, "= already in context"),
        Outcome::DocumentEdge => (PASSED_OVER, "| document edge"),
        Outcome::OverBudget => (OVER_BUDGET, "$ over budget"),
    }
}

/// The context's size beside static ±1's on the same seeds: what the policy saved.
pub(crate) fn comparison_ui(ui: &mut egui::Ui, report: &SearchReport, baseline: &SearchReport) {
    let (ours, theirs) = (&report.ledger, &baseline.ledger);
    let most = ours.context_tokens.max(theirs.context_tokens).max(1) as f32;
    let width = (ui.available_width() * 0.35).max(120.0);
    let row = |ui: &mut egui::Ui, name: String, chunks: usize, tokens: usize, colour| {
        ui.horizontal(|ui| {
            let (rect, _) = ui.allocate_exact_size(egui::vec2(width, 12.0), egui::Sense::hover());
            ui.painter()
                .rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
            let filled = rect.with_max_x(rect.left() + rect.width() * tokens as f32 / most);
            ui.painter().rect_filled(filled, 2.0, colour);
            ui.label(format!("{name}: {}, {tokens} tokens", chunk_count(chunks)));
        });
    };
    row(
        ui,
        ours.policy.to_string(),
        ours.context.len(),
        ours.context_tokens,
        SEED,
    );
    row(
        ui,
        "static ±1 on the same seeds".to_owned(),
        theirs.context.len(),
        theirs.context_tokens,
        PASSED_OVER,
    );
    let (our_chunks, their_chunks) = (ours.context.len(), theirs.context.len());
    let verdict = if ours.context_tokens <= theirs.context_tokens {
        let tokens = theirs.context_tokens - ours.context_tokens;
        format!(
            "saved {} and {tokens} tokens ({:.0}% of static ±1's tokens)",
            chunk_count(their_chunks.saturating_sub(our_chunks)),
            100.0 * tokens as f32 / theirs.context_tokens.max(1) as f32
        )
    } else {
        format!(
            "costs {} and {} tokens more than static ±1",
            chunk_count(our_chunks.saturating_sub(their_chunks)),
            ours.context_tokens - theirs.context_tokens
        )
    };
    ui.strong(verdict);
}

fn chunk_count(n: usize) -> String {
    if n == 1 {
        "1 chunk".to_owned()
    } else {
        format!("{n} chunks")
    }
}

/// One chunk the policy looked at, with everything decided about it.
struct Row<'a> {
    id: ChunkId,
    seed: Option<&'a SeedRecord>,
    decisions: Vec<(&'a SeedRecord, &'a NeighbourRecord)>,
}

/// The seeds and every neighbour they reached, by position in the documents.
fn rows<'a>(index: &Index, report: &'a SearchReport) -> BTreeMap<Position, Row<'a>> {
    fn row<'m, 'a>(
        rows: &'m mut BTreeMap<Position, Row<'a>>,
        index: &Index,
        id: ChunkId,
    ) -> &'m mut Row<'a> {
        rows.entry(index.position(id)).or_insert_with(|| Row {
            id,
            seed: None,
            decisions: Vec::new(),
        })
    }
    let mut rows = BTreeMap::new();
    for seed in &report.ledger.seeds {
        row(&mut rows, index, seed.id).seed = Some(seed);
        for neighbour in &seed.neighbours {
            if let Some(id) = neighbour.id {
                row(&mut rows, index, id).decisions.push((seed, neighbour));
            }
        }
    }
    rows
}

/// Draws the rows; returns the chunk whose place was clicked, to show in the seam map.
pub(crate) fn decisions_ui(
    ui: &mut egui::Ui,
    index: &Index,
    report: &SearchReport,
) -> Option<ChunkId> {
    let mut clicked = None;
    let policy = report.ledger.policy;
    egui::ScrollArea::vertical()
        .auto_shrink(false)
        .show(ui, |ui| {
            ui.heading("Decisions, in document order");
            let mut document = None;
            for (position, row) in rows(index, report) {
                let Some(chunk) = index.chunk(row.id) else {
                    continue;
                };
                if document != Some(position.document) {
                    document = Some(position.document);
                    ui.add_space(6.0);
                    ui.label(
                        RichText::new(file_name(&chunk.document.path))
                            .strong()
                            .size(15.0),
                    )
                    .on_hover_text(chunk.document.path.display().to_string());
                }
                let in_context = report.ledger.contains(row.id);
                if row_ui(ui, &row, &chunk, in_context, &policy) {
                    clicked = Some(row.id);
                }
            }
        });
    clicked
}

fn row_ui(
    ui: &mut egui::Ui,
    row: &Row<'_>,
    chunk: &scar_index::ChunkView<'_>,
    in_context: bool,
    policy: &Policy,
) -> bool {
    let accent = if row.seed.is_some() {
        SEED
    } else if in_context {
        ACCEPTED
    } else {
        row.decisions
            .first()
            .map_or(PASSED_OVER, |(_, n)| outcome_style(n.outcome).0)
    };
    let frame = egui::Frame::group(ui.style()).stroke(egui::Stroke::new(1.5, accent));
    frame
        .show(ui, |ui| {
            ui.set_width(ui.available_width());
            let clicked = ui
                .horizontal_wrapped(|ui| {
                    let place = ui
                        .link(RichText::new(format!("¶{}", chunk.ordinal)).strong())
                        .on_hover_text("Show in the seam map");
                    ui.weak(format!("{} tokens", chunk.token_count));
                    if !chunk.heading_path.is_empty() {
                        ui.weak(chunk.heading_path);
                    }
                    place.clicked()
                })
                .inner;
            if let Some(seed) = row.seed {
                seed_ui(ui, seed);
            }
            for (seed, neighbour) in &row.decisions {
                neighbour_ui(ui, seed, neighbour, policy);
            }
            let text = RichText::new(chunk.text.trim()).size(12.5);
            if in_context {
                ui.label(text);
            } else {
                egui::CollapsingHeader::new("text (not in the context)")
                    .id_salt(row.id)
                    .show(ui, |ui| ui.weak(chunk.text.trim()));
            }
            clicked
        })
        .inner
}

fn seed_ui(ui: &mut egui::Ui, seed: &SeedRecord) {
    ui.horizontal_wrapped(|ui| {
        ui.label(
            RichText::new(format!("seed #{}", seed.rank))
                .strong()
                .color(SEED),
        );
        ui.label(format!("cos(q,c) {:.3}", seed.query_cos))
            .on_hover_text(format!(
                "cos(q, c) = {:.6}\nfirst-stage score {:.6}",
                seed.query_cos, seed.score
            ));
        if let Some(bar) = seed.bar {
            ui.label(format!("bar {bar:.3}"))
                .on_hover_text(format!("bar = γ·max(cos(q, c), 0) = {bar:.6}"));
        }
        if !seed.in_context {
            let (colour, label) = outcome_style(Outcome::OverBudget);
            ui.colored_label(colour, label);
        }
    });
}

fn neighbour_ui(ui: &mut egui::Ui, seed: &SeedRecord, n: &NeighbourRecord, policy: &Policy) {
    let (colour, label) = outcome_style(n.outcome);
    let exact = exact_scores(seed, n, policy);
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new(label).strong().color(colour));
        let (arrow, relation) = match n.side {
            Side::Previous => ("◀", "before"),
            Side::Next => ("▶", "after"),
        };
        ui.weak(format!(
            "{arrow} {} {relation} seed #{}",
            n.distance, seed.rank
        ));
        let values = [
            ("cos(q,n)", n.query_cos),
            ("b", n.penalty),
            ("S", n.score),
            ("bar", n.bar),
        ];
        for (name, value) in values {
            if let Some(value) = value {
                ui.label(format!("{name} {value:.3}")).on_hover_text(&exact);
            }
        }
        if let Some(margin) = n.margin {
            ui.label(RichText::new(format!("margin {margin:+.3}")).color(colour))
                .on_hover_text(&exact);
        }
        if let (Some(score), Some(bar)) = (n.score, n.bar) {
            gauge_ui(ui, score, bar, colour).on_hover_text(&exact);
        }
    });
}

/// S against the bar on a 0–1 scale: a filled bar for S, a tick for the bar.
fn gauge_ui(ui: &mut egui::Ui, score: f32, bar: f32, colour: Color32) -> egui::Response {
    let (rect, response) = ui.allocate_exact_size(egui::vec2(90.0, 12.0), egui::Sense::hover());
    let x = |value: f32| rect.left() + rect.width() * value.clamp(0.0, 1.0);
    let painter = ui.painter();
    painter.rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
    painter.rect_filled(rect.with_max_x(x(score)), 2.0, colour);
    painter.vline(
        x(bar),
        rect.y_range().expand(2.0),
        egui::Stroke::new(2.0, ui.visuals().strong_text_color()),
    );
    response
}

/// Every number behind a decision, at full precision, with the rule that used it.
fn exact_scores(seed: &SeedRecord, n: &NeighbourRecord, policy: &Policy) -> String {
    let mut lines = Vec::new();
    if let Some(q) = n.query_cos {
        lines.push(format!("cos(q, n) = {q:.6}"));
    }
    if let Some(b) = n.penalty {
        lines.push(format!("b(c, n) = 1 − cos(c, n) = {b:.6}"));
    }
    if let (Policy::Scar { lambda, gamma, .. }, Some(q), Some(b), Some(s), Some(bar), Some(m)) =
        (policy, n.query_cos, n.penalty, n.score, n.bar, n.margin)
    {
        lines.push(format!(
            "S = cos(q, n) − λ·b = {q:.6} − {lambda}·{b:.6} = {s:.6}"
        ));
        lines.push(format!(
            "bar = γ·cos(q, c) = {gamma}·{:.6} = {bar:.6}",
            seed.query_cos
        ));
        let rule = if m > 0.0 { "S > bar" } else { "S ≤ bar" };
        lines.push(format!("margin = S − bar = {m:+.6} ({rule})"));
    }
    lines.push(outcome_style(n.outcome).1.to_owned());
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(outcome: Outcome) -> NeighbourRecord {
        NeighbourRecord {
            side: Side::Next,
            distance: 1,
            id: Some(ChunkId(4)),
            seam: None,
            query_cos: Some(0.655),
            penalty: Some(0.349),
            dense_rank: None,
            lexical_rank: None,
            score: Some(0.6201),
            bar: Some(0.5566),
            margin: Some(0.0635),
            outcome,
        }
    }

    fn seed() -> SeedRecord {
        SeedRecord {
            id: ChunkId(3),
            rank: 1,
            score: 0.69,
            query_cos: 0.69575,
            bar: Some(0.5566),
            scope: None,
            in_context: true,
            neighbours: vec![record(Outcome::Accepted)],
        }
    }

    #[test]
    fn exact_scores_spell_out_the_rule() {
        let text = exact_scores(&seed(), &record(Outcome::Accepted), &Policy::scar(1));
        assert!(text.contains("S = cos(q, n) − λ·b = 0.655000 − 0.1·0.349000 = 0.620100"));
        assert!(text.contains("bar = γ·cos(q, c) = 0.8·0.695750 = 0.556600"));
        assert!(text.contains("margin = S − bar = +0.063500 (S > bar)"));
        assert!(text.ends_with("✔ accepted"));
    }

    #[test]
    fn baselines_show_cosines_without_a_rule() {
        let mut n = record(Outcome::Accepted);
        (n.score, n.bar, n.margin) = (None, None, None);
        let text = exact_scores(&seed(), &n, &Policy::StaticWindow { window: 1 });
        assert!(text.contains("cos(q, n) = 0.655000"));
        assert!(!text.contains("bar"));
    }

    #[test]
    fn every_outcome_has_its_own_label() {
        let outcomes = [
            Outcome::Accepted,
            Outcome::Rejected,
            Outcome::NotReached,
            Outcome::AlreadyInContext,
            Outcome::DocumentEdge,
            Outcome::OverBudget,
        ];
        let labels: std::collections::HashSet<_> =
            outcomes.iter().map(|&o| outcome_style(o).1).collect();
        assert_eq!(labels.len(), outcomes.len());
        assert_ne!(
            outcome_style(Outcome::Accepted).0,
            outcome_style(Outcome::Rejected).0
        );
    }
}
