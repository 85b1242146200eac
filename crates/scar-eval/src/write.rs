//! The report's files: JSON, markdown, the plots and the neighbour table, in one folder.

use std::path::{Path, PathBuf};

use crate::Result;
use crate::neighbours::NeighbourRow;
use crate::plot::{plot_recall_vs_chunks, plot_roc};
use crate::report::EvalReport;
use crate::seeds::SeedRow;
use crate::signals::summarize;

/// Writes `report.json`, `report.md` and `recall_vs_chunks.png` into `dir` (created if
/// needed), and with a neighbour table `neighbours.jsonl`, `seeds.jsonl` and `roc.png` (the
/// first stage's signals); returns the paths written.
pub fn write_report(report: &EvalReport, dir: &Path) -> Result<Vec<PathBuf>> {
    fs_err::create_dir_all(dir)?;
    let mut paths = vec![
        dir.join("report.json"),
        dir.join("report.md"),
        dir.join("recall_vs_chunks.png"),
    ];
    fs_err::write(&paths[0], serde_json::to_string_pretty(report)? + "\n")?;
    fs_err::write(&paths[1], report.to_markdown())?;
    plot_recall_vs_chunks(report, &paths[2])?;
    let neighbours: Vec<&NeighbourRow> = report.stages.iter().flat_map(|s| &s.neighbours).collect();
    let seeds: Vec<&SeedRow> = report.stages.iter().flat_map(|s| &s.seeds).collect();
    paths.extend(write_lines(&dir.join("neighbours.jsonl"), &neighbours)?);
    paths.extend(write_lines(&dir.join("seeds.jsonl"), &seeds)?);
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

/// One JSON line per row into `path`, unless there are none.
fn write_lines<T: serde::Serialize>(path: &Path, rows: &[T]) -> Result<Option<PathBuf>> {
    if rows.is_empty() {
        return Ok(None);
    }
    let mut text = String::new();
    for row in rows {
        text += &serde_json::to_string(row)?;
        text.push('\n');
    }
    fs_err::write(path, text)?;
    Ok(Some(path.to_owned()))
}
