//! The seam map: a document the question's seeds are in as a strip of its chunks, the seams between them coloured by the
//! continuity stored at indexing time and marked with where the cut fell, the question's seeds
//! and neighbours marked on it, and a reader for the chunk clicked, which opens its document in
//! the system's viewer.

use std::path::{Path, PathBuf};

use egui::{Color32, RichText, Sense, Stroke, vec2};
use scar_core::{ChunkId, SeamKind};
use scar_policy::Outcome;
use scar_retrieve::{Neighbourhood, ReadChunk, SearchReport};

use crate::decisions::{SEED, outcome_colour, outcome_glyph, outcome_text};

const CELL: egui::Vec2 = vec2(30.0, 30.0);
const SEAM_WIDTH: f32 = 9.0;
/// A seam where the text breaks off: low cos(c, next).
const BREAK: Color32 = Color32::from_rgb(245, 150, 30);
/// A seam the text runs straight through: high cos(c, next).
const FLOW: Color32 = Color32::from_rgb(60, 70, 90);
/// The line that marks where a cut fell, drawn over either colour.
const CUT: Color32 = Color32::WHITE;

/// What the question made of one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Seed(usize),
    Decided(Outcome),
    Untouched,
}

impl Mark {
    fn of(report: &SearchReport, id: ChunkId) -> Self {
        let ledger = &report.ledger;
        if let Some(seed) = ledger.seeds.iter().find(|seed| seed.id == id) {
            return Self::Seed(seed.rank);
        }
        // A chunk some seed took counts as accepted, whatever another seed thought of it.
        if ledger.contains(id) {
            return Self::Decided(Outcome::Accepted);
        }
        ledger
            .neighbours()
            .find(|n| n.id == Some(id))
            .map_or(Self::Untouched, |n| Self::Decided(n.outcome))
    }

    fn style(self) -> Option<(Color32, String, String)> {
        match self {
            Self::Seed(rank) => Some((SEED, format!("#{rank}"), format!("seed #{rank}"))),
            Self::Decided(outcome) => Some((
                outcome_colour(outcome),
                outcome_glyph(outcome).to_string(),
                outcome_text(outcome),
            )),
            Self::Untouched => None,
        }
    }
}

/// How strongly a seam breaks the text: cos 0.8 and above flows, 0.2 and below breaks (the
/// range where sentence embeddings of adjacent passages fall).
fn seam_colour(continuity: f32) -> Color32 {
    let flow = ((continuity - 0.2) / 0.6).clamp(0.0, 1.0);
    BREAK.lerp_to_gamma(FLOW, flow)
}

/// The seam map of the shown document (one the seeds are in) and the reader of the selected
/// chunk; gives back the file (and page) or folder the user asked to open.
pub(crate) fn seam_map_ui(
    ui: &mut egui::Ui,
    read: &Neighbourhood,
    report: &SearchReport,
    document: &mut Option<u32>,
    selected: &mut Option<ChunkId>,
) -> Option<(PathBuf, Option<u32>)> {
    let documents = read.documents();
    let shown = documents
        .iter()
        .find(|d| Some(d.document.slot) == *document)
        .or_else(|| documents.first())?;
    ui.horizontal(|ui| {
        ui.heading("Seam map");
        egui::ComboBox::from_label("document")
            .selected_text(shown.document.name())
            .show_ui(ui, |ui| {
                for entry in documents {
                    let slot = entry.document.slot;
                    ui.selectable_value(document, Some(slot), entry.document.name());
                }
            });
        legend_ui(ui);
    });
    cut_legend_ui(ui);
    let per_line = ((ui.available_width() + SEAM_WIDTH) / (CELL.x + SEAM_WIDTH)).max(1.0) as usize;
    for line in shown.chunks.chunks(per_line) {
        ui.horizontal(|ui| {
            ui.spacing_mut().item_spacing.x = 0.0;
            for chunk in line {
                let id = chunk.chunk.id;
                if cell_ui(ui, chunk, Mark::of(report, id), *selected == Some(id)).clicked() {
                    *selected = Some(id);
                }
                if let Some(continuity) = chunk.continuity_next {
                    seam_ui(ui, chunk, continuity);
                }
            }
        });
    }
    let mut open = None;
    if let Some(chunk) = selected
        .and_then(|id| read.chunk(id))
        .map(|read| &read.chunk)
    {
        ui.add_space(4.0);
        ui.horizontal_wrapped(|ui| {
            let path = Path::new(&chunk.document);
            if ui
                .small_button("Open")
                .on_hover_text(match chunk.page {
                    Some(page) => format!("Open {} at page {page} in its viewer", path.display()),
                    None => format!("Open {} in its viewer", path.display()),
                })
                .clicked()
            {
                open = Some((path.to_owned(), chunk.page));
            }
            if let Some(folder) = path.parent()
                && ui
                    .small_button("Show in folder")
                    .on_hover_text(format!("Open {} in the file manager", folder.display()))
                    .clicked()
            {
                open = Some((folder.to_owned(), None));
            }
            let page = chunk.page.map(|page| format!(", p. {page}"));
            ui.strong(format!(
                "{} ¶{}{}",
                chunk.name(),
                chunk.ordinal,
                page.unwrap_or_default()
            ));
            ui.weak(format!("{} tokens", chunk.tokens));
            if let Some((colour, _, label)) = Mark::of(report, chunk.id).style() {
                ui.colored_label(colour, label);
            }
            if !chunk.heading_path.is_empty() {
                ui.weak(&chunk.heading_path);
            }
        });
        egui::ScrollArea::vertical()
            .id_salt("reader")
            .max_height(110.0)
            .auto_shrink([false, true])
            .show(ui, |ui| {
                ui.label(RichText::new(chunk.text.trim()).size(12.5))
            });
    }
    open
}

fn cell_ui(ui: &mut egui::Ui, chunk: &ReadChunk, mark: Mark, selected: bool) -> egui::Response {
    let (rect, response) = ui.allocate_exact_size(CELL, Sense::click());
    let visuals = ui.visuals();
    let style = mark.style();
    let fill = style
        .as_ref()
        .map_or(visuals.widgets.inactive.bg_fill, |s| s.0);
    let stroke = if selected {
        Stroke::new(2.5, visuals.strong_text_color())
    } else {
        Stroke::new(1.0, visuals.widgets.noninteractive.bg_stroke.color)
    };
    let painter = ui.painter();
    painter.rect(
        rect.shrink(1.0),
        3.0,
        fill,
        stroke,
        egui::StrokeKind::Inside,
    );
    let ordinal = chunk.chunk.ordinal;
    let text = style
        .as_ref()
        .map_or_else(|| ordinal.to_string(), |s| s.1.clone());
    let colour = if style.is_some() {
        Color32::WHITE
    } else {
        visuals.text_color()
    };
    painter.text(
        rect.center(),
        egui::Align2::CENTER_CENTER,
        text,
        egui::FontId::proportional(12.0),
        colour,
    );
    response
        .widget_info(|| egui::WidgetInfo::labeled(egui::Role::Button, true, format!("¶{ordinal}")));
    let role = style.map_or_else(|| "not considered".to_owned(), |s| s.2);
    let tokens = chunk.chunk.tokens;
    response.on_hover_text(format!(
        "¶{ordinal}, {tokens} tokens: {role}\nclick to read it"
    ))
}

/// The seam after chunk `id`: its colour is the continuity, its line where the cut fell.
fn seam_ui(ui: &mut egui::Ui, chunk: &ReadChunk, continuity: f32) {
    let (rect, response) = ui.allocate_exact_size(vec2(SEAM_WIDTH, CELL.y), Sense::hover());
    let kind = chunk.seam_next;
    paint_seam(ui.painter(), rect, continuity, kind);
    let ordinal = chunk.chunk.ordinal;
    let name = format!("cut ¶{ordinal}–¶{}", ordinal + 1);
    let cut = kind.map_or_else(String::new, |kind| format!(": {}", kind.label()));
    response
        .widget_info(|| egui::WidgetInfo::labeled(egui::Role::Image, true, format!("{name}{cut}")));
    response.on_hover_text(format!(
        "{name}{cut}\ncos(¶{ordinal}, ¶{}) = {continuity:.4}\nb = 1 − cos = {:.4}",
        ordinal + 1,
        1.0 - continuity
    ));
}

/// A seam in its continuity's colour with a line down the middle for where the cut fell.
fn paint_seam(painter: &egui::Painter, rect: egui::Rect, continuity: f32, kind: Option<SeamKind>) {
    painter.rect_filled(rect.shrink2(vec2(1.0, 0.0)), 1.0, seam_colour(continuity));
    if let Some(kind) = kind {
        painter.extend(cut_shapes(rect, kind));
    }
}

/// The line for a cut of `kind` down the middle of `rect`: the harder the cut, the bolder the
/// line, from dots inside a sentence to a thick line at a section change.
fn cut_shapes(rect: egui::Rect, kind: SeamKind) -> Vec<egui::Shape> {
    let x = rect.center().x;
    let line = [
        egui::pos2(x, rect.top() + 2.0),
        egui::pos2(x, rect.bottom() - 2.0),
    ];
    match kind {
        SeamKind::MidSentence => egui::Shape::dotted_line(&line, CUT, 4.0, 0.9),
        SeamKind::SentenceEnd => egui::Shape::dashed_line(&line, Stroke::new(1.5, CUT), 4.0, 3.0),
        SeamKind::ParagraphBreak => vec![egui::Shape::line_segment(line, Stroke::new(1.5, CUT))],
        SeamKind::SectionChange => vec![egui::Shape::line_segment(line, Stroke::new(3.5, CUT))],
    }
}

fn legend_ui(ui: &mut egui::Ui) {
    ui.weak("seams: cos(c, next)");
    for (value, name) in [(0.2, "breaks"), (0.8, "flows")] {
        let (rect, _) = ui.allocate_exact_size(vec2(12.0, 12.0), Sense::hover());
        ui.painter().rect_filled(rect, 2.0, seam_colour(value));
        ui.weak(name);
    }
}

/// Each kind of cut beside its mark, on a seam of middling continuity; hover for what it means.
fn cut_legend_ui(ui: &mut egui::Ui) {
    ui.horizontal(|ui| {
        ui.weak("cuts:");
        for kind in SeamKind::ALL {
            let (rect, mark) = ui.allocate_exact_size(vec2(SEAM_WIDTH, 18.0), Sense::hover());
            paint_seam(ui.painter(), rect, 0.5, Some(kind));
            let name = ui.weak(kind.label());
            mark.union(name).on_hover_text(cut_meaning(kind));
        }
    });
}

/// Where a cut of `kind` fell, in words.
fn cut_meaning(kind: SeamKind) -> &'static str {
    match kind {
        SeamKind::MidSentence => "dotted: the cut falls inside a sentence, which runs on",
        SeamKind::SentenceEnd => "dashed: the cut falls after a sentence, within a paragraph",
        SeamKind::ParagraphBreak => "a line: the cut falls at a blank line between paragraphs",
        SeamKind::SectionChange => "a thick line: the next chunk opens with a heading",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seams_run_from_break_to_flow() {
        assert_eq!(seam_colour(0.0), BREAK);
        assert_eq!(seam_colour(0.2), BREAK);
        assert_eq!(seam_colour(0.95), FLOW);
        assert_ne!(seam_colour(0.5), BREAK);
        assert_ne!(seam_colour(0.5), FLOW);
    }

    #[test]
    fn each_kind_of_cut_has_its_own_mark() {
        let rect = egui::Rect::from_min_size(egui::Pos2::ZERO, CELL);
        let marks: Vec<String> = SeamKind::ALL
            .into_iter()
            .map(|kind| format!("{:?}", cut_shapes(rect, kind)))
            .collect();
        for (i, mark) in marks.iter().enumerate() {
            assert!(!cut_shapes(rect, SeamKind::ALL[i]).is_empty());
            assert!(!marks[..i].contains(mark), "{:?}", SeamKind::ALL[i]);
        }
        let meanings: std::collections::HashSet<_> =
            SeamKind::ALL.into_iter().map(cut_meaning).collect();
        assert_eq!(meanings.len(), SeamKind::ALL.len());
    }
}
