//! The report's files: JSON, markdown, the plots and the neighbour table, in one folder.

use std::path::{Path, PathBuf};

use crate::Result;
use crate::neighbours::NeighbourRow;
use crate::plot::{plot_recall_vs_chunks, plot_roc};
use crate::report::EvalReport;
use crate::signals::summarize;

/// Writes `report.json`, `report.md` and `recall_vs_chunks.png` into `dir` (created if
/// needed), and with a neighbour table `neighbours.jsonl` and `roc.png` (the first stage's
/// signals); returns the paths written.
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
