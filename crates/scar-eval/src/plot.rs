//! `recall_vs_chunks.png`: the trade-off each policy and each sweep setting makes.
//!
//! Text needs a TrueType font, which plotters' `ab_glyph` feature does not bring: the first of
//! `$SCAR_PLOT_FONT` and a few common system paths (`DejaVu` Sans, Liberation Sans, Arial) is
//! read at run time. Without one the plot is drawn without text and the markdown report's
//! legend says what is what.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::metrics::Group;
use crate::options::SCAR_1;
use crate::report::{EvalReport, StageResult};
use crate::signals::SignalReport;
use crate::{EvalError, Result};

/// What drawing on a bitmap fails with.
type DrawError = DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>;

/// Each policy's colour, by key (other policies are drawn in black).
pub const LEGEND: [(&str, &str); 11] = [
    ("top_k", "blue"),
    ("static_1", "red"),
    ("static_2", "orange"),
    ("parent_4", "purple"),
    ("section", "brown"),
    ("scar_1", "green"),
    ("scar_2", "teal"),
    ("scar_1_lambda0", "olive"),
    ("evidence_1", "pink"),
    ("evidence_2", "navy"),
    ("evidence_3", "grey"),
];

const FONT: &str = "sans-serif";

fn colour(key: &str) -> RGBColor {
    match LEGEND.iter().find(|(k, _)| *k == key).map(|(_, c)| *c) {
        Some("blue") => RGBColor(31, 119, 180),
        Some("red") => RGBColor(214, 39, 40),
        Some("orange") => RGBColor(255, 127, 14),
        Some("purple") => RGBColor(148, 103, 189),
        Some("green") => RGBColor(44, 160, 44),
        Some("teal") => RGBColor(23, 190, 207),
        Some("olive") => RGBColor(188, 189, 34),
        Some("brown") => RGBColor(140, 86, 75),
        Some("pink") => RGBColor(227, 119, 194),
        Some("navy") => NAVY,
        Some("grey") => RGBColor(127, 127, 127),
        _ => BLACK,
    }
}

const NAVY: RGBColor = RGBColor(0, 0, 128);

/// Registers the first font found, once per process; whether there is one.
fn font() -> bool {
    static FOUND: OnceLock<bool> = OnceLock::new();
    *FOUND.get_or_init(|| {
        let candidates = std::env::var_os("SCAR_PLOT_FONT")
            .map(PathBuf::from)
            .into_iter()
            .chain(
                [
                    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                    "/usr/share/fonts/TTF/DejaVuSans.ttf",
                    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
                    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
                    "/System/Library/Fonts/Supplemental/Arial.ttf",
                    "C:\\Windows\\Fonts\\arial.ttf",
                ]
                .map(PathBuf::from),
            );
        candidates
            .filter_map(|path| std::fs::read(path).ok())
            .any(|bytes| {
                // Registered fonts must live as long as the process: leak this one file, once.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok()
            })
    })
}

/// Draws recall against mean unique chunks for the report's first first stage: boundary
/// tests on the left, atomic on the right; a coloured dot per policy ([`LEGEND`]), a grey dot
/// per SCAR sweep setting, a ring around SCAR ±1, and a navy line through the evidence walk's
/// depths.
pub fn plot_recall_vs_chunks(report: &EvalReport, path: &Path) -> Result<()> {
    draw(report, path, font())
}

fn draw(report: &EvalReport, path: &Path, text: bool) -> Result<()> {
    let Some(stage) = report.stages.first() else {
        return Ok(());
    };
    let root = BitMapBackend::new(path, (1200, 560)).into_drawing_area();
    let drawn = root.fill(&WHITE).and_then(|()| {
        let panels = root.split_evenly((1, 2));
        panels
            .iter()
            .zip([Group::Boundary, Group::Atomic])
            .try_for_each(|(area, group)| panel(area, stage, group, text))
    });
    drawn
        .and_then(|()| root.present())
        .map_err(|source| EvalError::Plot {
            path: path.to_owned(),
            source: Box::new(source),
        })
}

/// One group's panel: a grey dot per sweep setting, a coloured dot per policy, a ring around
/// SCAR ±1, and a legend when there is a font.
fn panel(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    stage: &StageResult,
    group: Group,
    text: bool,
) -> std::result::Result<(), DrawError> {
    let Some(n) = stage.tests_in(group) else {
        return Ok(());
    };
    let points: Vec<(f64, f64)> = stage
        .policies
        .iter()
        .filter_map(|p| p.group(group))
        .chain(stage.sweep.iter().filter_map(|p| p.group(group)))
        .chain(stage.depth_sweep.iter().filter_map(|p| p.group(group)))
        .map(|m| (m.mean_chunks, m.recall))
        .collect();
    // Chunks on a log scale: the section baseline takes ten times what the others do, and a
    // linear axis would squeeze every other policy into its first tenth.
    let x_min = points.iter().map(|p| p.0).fold(f64::MAX, f64::min) * 0.85;
    let x_max = points.iter().map(|p| p.0).fold(1.0, f64::max) * 1.2;
    let y_min = (points.iter().map(|p| p.1).fold(1.0, f64::min) - 0.05).max(0.0);
    let mut builder = ChartBuilder::on(area);
    builder.margin(20);
    if text {
        let caption = format!("{} tests (n = {n}), {}", group.label(), stage.first_stage);
        builder
            .caption(caption, (FONT, 20))
            .x_label_area_size(40)
            .y_label_area_size(50);
    }
    let mut chart = builder.build_cartesian_2d((x_min..x_max).log_scale(), y_min..1.02)?;
    let mut mesh = chart.configure_mesh();
    if text {
        mesh.x_desc("mean unique chunks (log scale)")
            .y_desc("recall")
            .x_labels(9)
            .light_line_style(WHITE)
            .label_style((FONT, 14));
    } else {
        mesh.x_labels(0).y_labels(0);
    }
    mesh.draw()?;
    let grey = RGBColor(170, 170, 170);
    let sweep = stage.sweep.iter().filter_map(|p| p.group(group));
    chart
        .draw_series(sweep.map(|m| Circle::new((m.mean_chunks, m.recall), 3, grey.filled())))?
        .label("SCAR ±1, λ × γ sweep")
        .legend(move |at| Circle::new(at, 3, grey.filled()));
    let depths = stage.depth_sweep.iter().filter_map(|p| p.group(group));
    let frontier: Vec<(f64, f64)> = depths.map(|m| (m.mean_chunks, m.recall)).collect();
    chart
        .draw_series(LineSeries::new(
            frontier.iter().copied(),
            NAVY.stroke_width(2),
        ))?
        .label("evidence ±2, depth sweep")
        .legend(|(x, y)| PathElement::new([(x - 8, y), (x + 8, y)], NAVY.stroke_width(2)));
    chart.draw_series(frontier.iter().map(|&at| Circle::new(at, 3, NAVY.filled())))?;
    for policy in &stage.policies {
        let Some(m) = policy.group(group) else {
            continue;
        };
        let at = (m.mean_chunks, m.recall);
        let fill = colour(&policy.key).filled();
        chart
            .draw_series([Circle::new(at, 7, fill)])?
            .label(policy.label.clone())
            .legend(move |at| Circle::new(at, 6, fill));
        if policy.key == SCAR_1 {
            let ring = Circle::new(at, 11, BLACK.stroke_width(2));
            chart.draw_series([ring])?;
        }
    }
    // One legend, on the boundary panel, where the lower right stays empty (the atomic panel's
    // narrower recall range leaves no corner free); both panels use the same colours.
    if text && group == Group::Boundary {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, 13))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    Ok(())
}

/// Draws the ROC curve of every neighbour signal of `stage` (boundary-fragmented tests,
/// distance 1), the chance diagonal, and the paper's rule as a point.
pub fn plot_roc(stage: &StageResult, report: &SignalReport, path: &Path) -> Result<()> {
    draw_roc(stage, report, path, font())
}

/// Line colours for the ROC curves, in the order of [`crate::SIGNALS`].
const PALETTE: [RGBColor; 9] = [
    RGBColor(44, 160, 44),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(255, 127, 14),
    RGBColor(31, 119, 180),
    RGBColor(227, 119, 194),
    NAVY,
];

fn draw_roc(stage: &StageResult, report: &SignalReport, path: &Path, text: bool) -> Result<()> {
    let root = BitMapBackend::new(path, (900, 760)).into_drawing_area();
    let drawn = (|| -> std::result::Result<(), DrawError> {
        root.fill(&WHITE)?;
        let mut builder = ChartBuilder::on(&root);
        builder.margin(20);
        if text {
            let caption = format!(
                "Which signal tells a useful neighbour? ({} of {}, {})",
                report.useful, report.neighbours, stage.first_stage
            );
            builder
                .caption(caption, (FONT, 20))
                .x_label_area_size(40)
                .y_label_area_size(50);
        }
        let mut chart = builder.build_cartesian_2d(0.0..1.0, 0.0..1.0)?;
        let mut mesh = chart.configure_mesh();
        if text {
            mesh.x_desc("share of other neighbours accepted (false positive rate)")
                .y_desc("share of useful neighbours accepted")
                .label_style((FONT, 14));
        } else {
            mesh.x_labels(0).y_labels(0);
        }
        mesh.draw()?;
        let grey = RGBColor(170, 170, 170);
        chart.draw_series(LineSeries::new([(0.0, 0.0), (1.0, 1.0)], grey))?;
        for ((name, curve), (colour, summary)) in crate::signals::curves(stage)
            .into_iter()
            .zip(PALETTE.iter().zip(&report.signals))
        {
            let series = chart.draw_series(LineSeries::new(curve, colour.stroke_width(2)))?;
            if text {
                let label = format!("{name} (AUC {:.3})", summary.auc);
                series
                    .label(label)
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], *colour));
            }
        }
        let (fpr, tpr) = report.paper_point;
        chart.draw_series([Circle::new((fpr, tpr), 8, BLACK.stroke_width(2))])?;
        if text {
            let label = EmptyElement::at((fpr, tpr))
                + Text::new("paper's rule", (12, -6), (FONT, 14).into_font());
            chart.draw_series([label])?;
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK)
                .label_font((FONT, 13))
                .draw()?;
        }
        root.present()
    })();
    drawn.map_err(|source| EvalError::Plot {
        path: path.to_owned(),
        source: Box::new(source),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_plot_is_drawn_with_and_without_text() {
        let report = crate::hand_computed::small_report();
        let dir = tempfile::tempdir().unwrap();
        for text in [false, super::font()] {
            let path = dir.path().join(format!("plot-{text}.png"));
            super::draw(&report, &path, text).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert!(bytes.starts_with(b"\x89PNG"), "{}", path.display());
        }
    }
}
