//! The decisions view: every chunk the policy looked at, in document order, with what it
//! decided and the scores behind it; and the comparison with static ±1.

use std::collections::BTreeMap;

use egui::{Color32, RichText};
use scar_core::{ChunkId, Position};
use scar_policy::{NeighbourRecord, Outcome, Policy, RRF_K, SeedRecord, Side, fused_score};
use scar_retrieve::{ContextSize, Neighbourhood, Prepared, SearchReport, StoredChunk};

/// Seeds: the first stage's picks.
pub(crate) const SEED: Color32 = Color32::from_rgb(66, 135, 245);
const ACCEPTED: Color32 = Color32::from_rgb(46, 170, 80);
const REJECTED: Color32 = Color32::from_rgb(225, 70, 70);
const OVER_BUDGET: Color32 = Color32::from_rgb(230, 160, 30);
const PASSED_OVER: Color32 = Color32::from_rgb(130, 130, 140);

/// An outcome's colour; the label carries the meaning, the colour repeats it.
pub(crate) fn outcome_colour(outcome: Outcome) -> Color32 {
    match outcome {
        Outcome::Accepted => ACCEPTED,
        Outcome::Rejected => REJECTED,
        Outcome::OverBudget => OVER_BUDGET,
        Outcome::NotReached | Outcome::AlreadyInContext | Outcome::DocumentEdge => PASSED_OVER,
    }
}

/// The ledger's mark for an outcome, but ✔ and ✖ for its ✓ and ✗, which egui's default fonts
/// lack.
pub(crate) fn outcome_glyph(outcome: Outcome) -> char {
    match outcome {
        Outcome::Accepted => '✔',
        Outcome::Rejected => '✖',
        other => other.mark(),
    }
}

/// An outcome as the view shows it: `✔ accepted`, `✖ rejected`, `· not reached`, ...
pub(crate) fn outcome_text(outcome: Outcome) -> String {
    format!("{} {}", outcome_glyph(outcome), outcome.label())
}

/// The context's size beside static ±1's on the same seeds: what the policy saved, or what it
/// costs more.
pub(crate) fn comparison_ui(ui: &mut egui::Ui, report: &SearchReport) {
    let comparison = report.comparison();
    let most = comparison
        .policy
        .tokens
        .max(comparison.baseline.tokens)
        .max(1) as f32;
    let width = (ui.available_width() * 0.35).max(120.0);
    let row = |ui: &mut egui::Ui, name: String, size: ContextSize, colour| {
        ui.horizontal(|ui| {
            let (rect, _) = ui.allocate_exact_size(egui::vec2(width, 12.0), egui::Sense::hover());
            ui.painter()
                .rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
            let filled = rect.with_max_x(rect.left() + rect.width() * size.tokens as f32 / most);
            ui.painter().rect_filled(filled, 2.0, colour);
            ui.label(format!("{name}: {size}"));
        });
    };
    row(
        ui,
        report.ledger.policy.to_string(),
        comparison.policy,
        SEED,
    );
    row(
        ui,
        "static ±1 on the same seeds".to_owned(),
        comparison.baseline,
        PASSED_OVER,
    );
    ui.strong(comparison.verdict());
}

/// One chunk the policy looked at, with everything decided about it.
struct Row<'a> {
    id: ChunkId,
    seed: Option<&'a SeedRecord>,
    decisions: Vec<(&'a SeedRecord, &'a NeighbourRecord)>,
}

/// The seeds and every neighbour they reached, by position in the documents.
fn rows<'a>(read: &Neighbourhood, report: &'a SearchReport) -> BTreeMap<Position, Row<'a>> {
    fn row<'m, 'a>(
        rows: &'m mut BTreeMap<Position, Row<'a>>,
        read: &Neighbourhood,
        id: ChunkId,
    ) -> Option<&'m mut Row<'a>> {
        let position = read.chunk(id)?.position;
        Some(rows.entry(position).or_insert_with(|| Row {
            id,
            seed: None,
            decisions: Vec::new(),
        }))
    }
    let mut rows = BTreeMap::new();
    for seed in &report.ledger.seeds {
        if let Some(row) = row(&mut rows, read, seed.id) {
            row.seed = Some(seed);
        }
        for neighbour in &seed.neighbours {
            if let Some(row) = neighbour.id.and_then(|id| row(&mut rows, read, id)) {
                row.decisions.push((seed, neighbour));
            }
        }
    }
    rows
}

/// How to read a ledger's scores: the rule that made them.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    /// SCAR with its λ and γ: the scores are cosines.
    Scar { lambda: f32, gamma: f32 },
    /// The evidence walk: the scores are fused ranks, and the bar stands for the rank D that
    /// each seed's record holds.
    Evidence(BarDepth),
    /// A baseline: no score and no bar.
    Baseline,
}

/// What the evidence walk's D is made of: a chunk ranked D in both lists scores exactly the
/// bar, (1 + w)/(60 + D) for BM25's weight w, and D is depth × seeds within the better half of
/// the chunks searched.
#[derive(Debug, Clone, Copy, PartialEq)]
struct BarDepth {
    depth: u32,
    seeds: usize,
    /// The chunks searched.
    scope: usize,
    /// How much BM25's rank counts: the share of the question its words could read.
    lexical_weight: f32,
}

impl Rule {
    /// The rule of `report`'s policy, over the rankings it read in `prepared`.
    fn of(report: &SearchReport, prepared: &Prepared) -> Self {
        match report.ledger.policy {
            Policy::Scar { lambda, gamma, .. } => Self::Scar { lambda, gamma },
            Policy::Evidence { depth, .. } => Self::Evidence(BarDepth {
                depth,
                seeds: prepared.seeds.len(),
                scope: prepared.rankings.scope(),
                lexical_weight: report.ledger.lexical_weight,
            }),
            Policy::TopK
            | Policy::StaticWindow { .. }
            | Policy::Parent { .. }
            | Policy::Section { .. } => Self::Baseline,
        }
    }

    fn is_evidence(&self) -> bool {
        matches!(self, Self::Evidence(_))
    }

    /// How much BM25's rank counts in the evidence walk's scores and bar; 1 for the rules
    /// that read no rank.
    fn lexical_weight(&self) -> f32 {
        match self {
            Self::Evidence(depth) => depth.lexical_weight,
            Self::Scar { .. } | Self::Baseline => 1.0,
        }
    }

    /// Digits worth showing: SCAR's scores are cosines, the evidence walk's fused ranks, two
    /// orders smaller.
    fn digits(&self) -> usize {
        if self.is_evidence() { 4 } else { 3 }
    }

    /// The gauge's full scale: a cosine of 1, or the fused score of a chunk first in both
    /// lists.
    fn scale(&self) -> f32 {
        if self.is_evidence() {
            fused_score(Some(1), Some(1), self.lexical_weight())
        } else {
            1.0
        }
    }

    /// The seed's bar as the rows show it.
    fn bar_text(&self, seed: &SeedRecord, bar: f32) -> String {
        let digits = self.digits();
        match seed.bar_rank {
            Some(rank) if self.is_evidence() => {
                format!("bar {bar:.digits$} (ranked {rank} in both lists)")
            }
            _ => format!("bar {bar:.digits$}"),
        }
    }

    /// The seed's bar: its formula with its values.
    fn bar_exact(&self, seed: &SeedRecord, bar: f32) -> String {
        match (self, seed.bar_rank) {
            (Self::Scar { gamma, .. }, _) => format!(
                "bar = γ·max(cos(q, c), 0) = {gamma}·{:.6} = {bar:.6}",
                seed.query_cos.max(0.0)
            ),
            (Self::Evidence(depth), Some(rank)) if depth.lexical_weight < 1.0 => format!(
                "bar = (1 + w)/({RRF_K} + D) = (1 + {:.4})/({RRF_K} + {rank}) = {bar:.6}\n{}\n{}",
                depth.lexical_weight,
                depth.derivation(rank),
                weight_text(depth.lexical_weight)
            ),
            (Self::Evidence(depth), Some(rank)) => format!(
                "bar = 2/({RRF_K} + D) = 2/({RRF_K} + {rank}) = {bar:.6}\n{}",
                depth.derivation(rank)
            ),
            (Self::Evidence(_) | Self::Baseline, _) => format!("bar = {bar:.6}"),
        }
    }
}

/// What BM25's weight w is, for a question whose words the documents do not all hold.
fn weight_text(weight: f32) -> String {
    format!(
        "w = {weight:.4}: the share of the question's words that the documents hold, \
         BM25's vote"
    )
}

impl BarDepth {
    /// Where `rank`, the D the ledger holds, comes from: depth × seeds, unless that reaches
    /// past the better half of the chunks searched.
    fn derivation(&self, rank: u32) -> String {
        let wanted = self.depth as usize * self.seeds;
        let product = format!("depth × seeds = {} × {} = {wanted}", self.depth, self.seeds);
        if wanted == rank as usize {
            format!("D = {product}")
        } else {
            format!(
                "D = {rank}: {product}, kept within the better half of the {} chunks searched",
                self.scope
            )
        }
    }
}

/// Draws the rows; returns the chunk whose place was clicked, to show in the seam map.
pub(crate) fn decisions_ui(
    ui: &mut egui::Ui,
    read: &Neighbourhood,
    report: &SearchReport,
    prepared: &Prepared,
) -> Option<ChunkId> {
    let mut clicked = None;
    let rule = Rule::of(report, prepared);
    egui::ScrollArea::vertical()
        .auto_shrink(false)
        .show(ui, |ui| {
            ui.heading("Decisions, in document order");
            let mut document = None;
            for (position, row) in rows(read, report) {
                let Some(chunk) = read.chunk(row.id).map(|read| &read.chunk) else {
                    continue;
                };
                if document != Some(position.document) {
                    document = Some(position.document);
                    ui.add_space(6.0);
                    ui.label(RichText::new(chunk.name()).strong().size(15.0))
                        .on_hover_text(&chunk.document);
                }
                let in_context = report.ledger.contains(row.id);
                if row_ui(ui, &row, chunk, in_context, &rule) {
                    clicked = Some(row.id);
                }
            }
        });
    clicked
}

fn row_ui(
    ui: &mut egui::Ui,
    row: &Row<'_>,
    chunk: &StoredChunk,
    in_context: bool,
    rule: &Rule,
) -> bool {
    let accent = if row.seed.is_some() {
        SEED
    } else if in_context {
        ACCEPTED
    } else {
        row.decisions
            .first()
            .map_or(PASSED_OVER, |(_, n)| outcome_colour(n.outcome))
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
                    ui.weak(format!("{} tokens", chunk.tokens));
                    if !chunk.heading_path.is_empty() {
                        ui.weak(&chunk.heading_path);
                    }
                    place.clicked()
                })
                .inner;
            if let Some(seed) = row.seed {
                seed_ui(ui, seed, rule);
            }
            for (seed, neighbour) in &row.decisions {
                neighbour_ui(ui, seed, neighbour, rule);
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

fn seed_ui(ui: &mut egui::Ui, seed: &SeedRecord, rule: &Rule) {
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
        if let Some(judged) = seed.judged {
            ui.label(format!(
                "reranker {:.3} (first stage #{})",
                judged.score, judged.first_stage_rank
            ))
            .on_hover_text(format!(
                "the reranker's score {:.6}; the first stage ranked this seed #{} of its \
                 candidates",
                judged.score, judged.first_stage_rank
            ));
        }
        if let Some(bar) = seed.bar {
            ui.label(rule.bar_text(seed, bar))
                .on_hover_text(rule.bar_exact(seed, bar));
        }
        if !seed.in_context {
            let outcome = Outcome::OverBudget;
            ui.colored_label(outcome_colour(outcome), outcome_text(outcome));
        }
    });
}

/// A rank as the rows show it: `#12`, or `–` where the list did not reach the chunk.
fn rank_text(rank: Option<u32>) -> String {
    rank.map_or_else(|| "–".to_owned(), |rank| format!("#{rank}"))
}

fn neighbour_ui(ui: &mut egui::Ui, seed: &SeedRecord, n: &NeighbourRecord, rule: &Rule) {
    let colour = outcome_colour(n.outcome);
    let exact = exact_scores(seed, n, rule);
    let digits = rule.digits();
    ui.horizontal_wrapped(|ui| {
        ui.label(
            RichText::new(outcome_text(n.outcome))
                .strong()
                .color(colour),
        );
        let (arrow, relation) = match n.side {
            Side::Previous => ("◀", "before"),
            Side::Next => ("▶", "after"),
        };
        ui.weak(format!(
            "{arrow} {} {relation} seed #{}",
            n.distance, seed.rank
        ));
        if let Some(seam) = n.seam {
            ui.label(format!("cut: {}", seam.label()))
                .on_hover_text(&exact);
        }
        let mut values = vec![n.query_cos.map(|q| format!("cos(q,n) {q:.3}"))];
        if !rule.is_evidence() {
            values.push(n.penalty.map(|b| format!("b {b:.3}")));
        }
        if n.id.is_some() {
            values.push(Some(format!(
                "dense {} bm25 {}",
                rank_text(n.dense_rank),
                rank_text(n.lexical_rank)
            )));
        }
        if let (Some(score), Some(bar)) = (n.score, n.bar) {
            if rule.is_evidence() {
                let relation = if score > bar { ">" } else { "≤" };
                values.push(Some(format!(
                    "score {score:.digits$} {relation} {}",
                    rule.bar_text(seed, bar)
                )));
            } else {
                values.push(Some(format!("S {score:.digits$}")));
                values.push(Some(rule.bar_text(seed, bar)));
            }
        }
        for value in values.into_iter().flatten() {
            ui.label(value).on_hover_text(&exact);
        }
        if let Some(margin) = n.margin {
            ui.label(RichText::new(format!("margin {margin:+.digits$}")).color(colour))
                .on_hover_text(&exact);
        }
        if let (Some(score), Some(bar)) = (n.score, n.bar) {
            let scale = rule.scale();
            gauge_ui(ui, score / scale, bar / scale, colour).on_hover_text(&exact);
        }
    });
}

/// A score against the bar, both as shares of the gauge's scale: a filled bar for the score, a
/// tick for the bar.
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

/// Every value behind a decision, at full precision, with the rule that used it.
fn exact_scores(seed: &SeedRecord, n: &NeighbourRecord, rule: &Rule) -> String {
    let mut lines = Vec::new();
    if let Some(seam) = n.seam {
        lines.push(format!("cut crossed: {}", seam.label()));
    }
    if let Some(q) = n.query_cos {
        lines.push(format!("cos(q, n) = {q:.6}"));
    }
    if let Some(b) = n.penalty {
        lines.push(format!("b(c, n) = 1 − cos(c, n) = {b:.6}"));
    }
    if n.id.is_some() {
        let rank = |rank: Option<u32>| {
            rank.map_or_else(
                || "none (the list did not reach it)".to_owned(),
                |r| r.to_string(),
            )
        };
        lines.push(format!("dense rank {}", rank(n.dense_rank)));
        lines.push(format!("BM25 rank {}", rank(n.lexical_rank)));
    }
    if let (Some(s), Some(bar), Some(m)) = (n.score, n.bar, n.margin) {
        match rule {
            Rule::Scar { lambda, .. } => {
                if let (Some(q), Some(b)) = (n.query_cos, n.penalty) {
                    lines.push(format!(
                        "S = cos(q, n) − λ·b = {q:.6} − {lambda}·{b:.6} = {s:.6}"
                    ));
                }
            }
            Rule::Evidence(_) | Rule::Baseline => {
                let weight = |weight: f32| {
                    if weight < 1.0 {
                        format!("{weight:.4}")
                    } else {
                        "1".to_owned()
                    }
                };
                let terms: Vec<String> =
                    [(n.dense_rank, 1.0), (n.lexical_rank, rule.lexical_weight())]
                        .into_iter()
                        .filter_map(|(rank, w)| {
                            rank.map(|rank| format!("{}/({RRF_K} + {rank})", weight(w)))
                        })
                        .collect();
                let sum = if terms.is_empty() {
                    "0 (in neither list)".to_owned()
                } else {
                    terms.join(" + ")
                };
                lines.push(format!("score = {sum} = {s:.6}"));
            }
        }
        lines.push(rule.bar_exact(seed, bar));
        let name = if rule.is_evidence() { "score" } else { "S" };
        let relation = if s > bar { ">" } else { "≤" };
        lines.push(format!(
            "margin = {name} − bar = {m:+.6} ({name} {relation} bar)"
        ));
    }
    lines.push(outcome_text(n.outcome));
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use scar_policy::Rankings;

    use super::*;

    fn record(outcome: Outcome) -> NeighbourRecord {
        NeighbourRecord {
            side: Side::Next,
            distance: 1,
            id: Some(ChunkId(4)),
            seam: Some(scar_policy::SeamKind::MidSentence),
            query_cos: Some(0.655),
            penalty: Some(0.349),
            dense_rank: Some(12),
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
            judged: None,
            query_cos: 0.69575,
            bar: Some(0.5566),
            bar_rank: None,
            scope: None,
            in_context: true,
            neighbours: vec![record(Outcome::Accepted)],
        }
    }

    const SCAR: Rule = Rule::Scar {
        lambda: Policy::PAPER_LAMBDA,
        gamma: Policy::PAPER_GAMMA,
    };

    /// The evidence walk at depth 10 over 5 seeds among `scope` chunks, and a seed whose bar
    /// stands for the rank the policy chose there.
    fn evidence(scope: usize) -> (Rule, SeedRecord) {
        let rank = Rankings::new([], [], 0, scope).evidence_rank(10, 5);
        let rule = Rule::Evidence(BarDepth {
            depth: 10,
            seeds: 5,
            scope,
            lexical_weight: 1.0,
        });
        let seed = SeedRecord {
            bar_rank: Some(rank),
            ..seed()
        };
        (rule, seed)
    }

    #[test]
    fn exact_scores_spell_out_scars_rule() {
        let text = exact_scores(&seed(), &record(Outcome::Accepted), &SCAR);
        assert!(text.contains("cut crossed: mid-sentence"));
        assert!(text.contains("dense rank 12\nBM25 rank none (the list did not reach it)"));
        assert!(text.contains("S = cos(q, n) − λ·b = 0.655000 − 0.1·0.349000 = 0.620100"));
        assert!(text.contains("bar = γ·max(cos(q, c), 0) = 0.8·0.695750 = 0.556600"));
        assert!(text.contains("margin = S − bar = +0.063500 (S > bar)"));
        assert!(text.ends_with("✔ accepted"));
    }

    #[test]
    fn exact_scores_spell_out_the_evidence_walks_rule() {
        let mut n = record(Outcome::Rejected);
        (n.lexical_rank, n.score, n.bar, n.margin) =
            (Some(31), Some(0.024_878), Some(0.018_182), Some(0.006_696));
        let (rule, seed) = evidence(2_000);
        let text = exact_scores(&seed, &n, &rule);
        assert!(
            text.contains("score = 1/(60 + 12) + 1/(60 + 31) = 0.024878"),
            "{text}"
        );
        assert!(text.contains("bar = 2/(60 + D) = 2/(60 + 50) = 0.018182"));
        assert!(text.contains("D = depth × seeds = 10 × 5 = 50"));
        assert!(text.contains("margin = score − bar = +0.006696 (score > bar)"));
        assert!(text.ends_with("✖ rejected"));

        (n.dense_rank, n.lexical_rank) = (None, None);
        let (rule, seed) = evidence(60);
        let text = exact_scores(&seed, &n, &rule);
        assert!(text.contains("score = 0 (in neither list)"));
        assert!(text.contains(
            "D = 30: depth × seeds = 10 × 5 = 50, kept within the better half of the 60 chunks \
             searched"
        ));
    }

    #[test]
    fn a_weighed_bm25_vote_is_spelled_out() {
        let mut n = record(Outcome::Accepted);
        n.lexical_rank = Some(31);
        let (rule, seed) = evidence(2_000);
        let Rule::Evidence(depth) = rule else {
            unreachable!()
        };
        let rule = Rule::Evidence(BarDepth {
            lexical_weight: 0.25,
            ..depth
        });
        (n.score, n.bar, n.margin) = (
            Some(1.0 / 72.0 + 0.25 / 91.0),
            Some(1.25 / 110.0),
            Some(1.0 / 72.0 + 0.25 / 91.0 - 1.25 / 110.0),
        );
        let text = exact_scores(&seed, &n, &rule);
        assert!(
            text.contains("score = 1/(60 + 12) + 0.2500/(60 + 31) = 0.016636"),
            "{text}"
        );
        assert!(text.contains("bar = (1 + w)/(60 + D) = (1 + 0.2500)/(60 + 50) = 0.011364"));
        assert!(text.contains("w = 0.2500: the share of the question's words"));
        assert!((rule.scale() - 1.25 / 61.0).abs() < 1e-7);
    }

    #[test]
    fn the_evidence_walks_bar_reads_as_a_rank() {
        let (walk, ranked) = evidence(2_000);
        assert_eq!(
            walk.bar_text(&ranked, 0.018_18),
            "bar 0.0182 (ranked 50 in both lists)"
        );
        assert!((walk.scale() - 2.0 / 61.0).abs() < 1e-7);
        assert_eq!(SCAR.bar_text(&seed(), 0.5566), "bar 0.557");
    }

    #[test]
    fn baselines_show_cosines_without_a_rule() {
        let mut n = record(Outcome::Accepted);
        (n.score, n.bar, n.margin) = (None, None, None);
        let text = exact_scores(&seed(), &n, &Rule::Baseline);
        assert!(text.contains("cos(q, n) = 0.655000"));
        assert!(!text.contains("bar"));
    }

    #[test]
    fn every_outcome_has_its_own_label_from_the_ledger() {
        let outcomes = [
            Outcome::Accepted,
            Outcome::Rejected,
            Outcome::NotReached,
            Outcome::AlreadyInContext,
            Outcome::DocumentEdge,
            Outcome::OverBudget,
        ];
        let labels: std::collections::HashSet<_> =
            outcomes.iter().map(|&o| outcome_text(o)).collect();
        assert_eq!(labels.len(), outcomes.len());
        assert_eq!(outcome_text(Outcome::NotReached), "· not reached");
        assert_ne!(
            outcome_colour(Outcome::Accepted),
            outcome_colour(Outcome::Rejected)
        );
    }
}
