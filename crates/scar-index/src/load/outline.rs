//! Text assembled from a document's structure, for the formats whose text comes out of markup
//! (office files, e-books, mail): headings, paragraphs and tables, each block separated from the
//! next by a blank line so that the chunker cuts between them first.

use std::collections::HashMap;

use super::{Heading, collapse_whitespace};

/// Bytes of column names a table row may carry beyond twice its own text.
const NAMES_ALLOWANCE: usize = 120;

/// A document's text being written block by block, with the headings met on the way.
#[derive(Debug, Default)]
pub(super) struct Outline {
    text: String,
    headings: Vec<Heading>,
}

impl Outline {
    /// A heading line; blank titles are dropped, since they name nothing.
    pub(super) fn heading(&mut self, level: u8, title: &str) {
        let title = collapse_whitespace(title);
        if title.is_empty() {
            return;
        }
        self.start_block();
        self.headings.push(Heading {
            offset: self.text.len(),
            level: level.clamp(1, 6),
            title: title.clone(),
        });
        self.text.push_str(&title);
    }

    /// A paragraph, its lines kept; blank ones are dropped.
    pub(super) fn paragraph(&mut self, text: &str) {
        let lines: Vec<String> = text
            .lines()
            .map(collapse_whitespace)
            .filter(|line| !line.is_empty())
            .collect();
        if lines.is_empty() {
            return;
        }
        self.start_block();
        self.text.push_str(&lines.join("\n"));
    }

    /// A table, its first row taken as the column names: every later row is one line that
    /// names each cell's column (`Fare: 8 euros; Return: 16 euros`), so that a row cut from its
    /// header still says what its cells are.
    pub(super) fn table(&mut self, rows: &[Vec<String>]) {
        let rows: Vec<Vec<(usize, String)>> = rows
            .iter()
            .map(|row| row.iter().cloned().enumerate().collect())
            .collect();
        self.sparse_table(&rows);
    }

    /// [`Outline::table`] for rows of the cells that hold text, each with its column. A row
    /// names its columns only while the names at most triple its text: long names over many
    /// short cells would otherwise multiply a table's size.
    pub(super) fn sparse_table(&mut self, rows: &[Vec<(usize, String)>]) {
        let rows: Vec<Vec<(usize, String)>> = rows
            .iter()
            .map(|row| {
                row.iter()
                    .map(|(column, cell)| (*column, collapse_whitespace(cell)))
                    .filter(|(_, cell)| !cell.is_empty())
                    .collect()
            })
            .filter(|row: &Vec<(usize, String)>| !row.is_empty())
            .collect();
        let Some((header, body)) = rows.split_first() else {
            return;
        };
        let column_names: HashMap<usize, &str> = header
            .iter()
            .map(|(column, name)| (*column, name.as_str()))
            .collect();
        let mut lines = vec![join_cells(header.iter().map(|(_, name)| name), " | ")];
        lines.extend(body.iter().map(|row| {
            let named = join_cells(
                row.iter()
                    .map(|(column, cell)| match column_names.get(column) {
                        Some(name) if name != cell => format!("{name}: {cell}"),
                        _ => cell.clone(),
                    }),
                "; ",
            );
            let plain = join_cells(row.iter().map(|(_, cell)| cell), "; ");
            if named.len() <= 3 * plain.len() + NAMES_ALLOWANCE {
                named
            } else {
                plain
            }
        }));
        self.start_block();
        self.text.push_str(&lines.join("\n"));
    }

    /// Text that another reader laid out (a chapter's HTML), with its headings.
    pub(super) fn section(&mut self, text: &str, headings: Vec<Heading>) {
        if text.trim().is_empty() {
            return;
        }
        self.start_block();
        let shift = self.text.len();
        self.text.push_str(text);
        self.headings
            .extend(headings.into_iter().map(|heading| Heading {
                offset: heading.offset + shift,
                ..heading
            }));
    }

    pub(super) fn finish(self) -> (String, Vec<Heading>) {
        (self.text, self.headings)
    }

    fn start_block(&mut self) {
        if !self.text.is_empty() {
            self.text.push_str("\n\n");
        }
    }
}

/// The heading level a word processor's style name stands for: `heading 2` is 2, `Title` 1.
pub(super) fn level_from_style_name(name: &str) -> Option<u8> {
    let name = name.to_ascii_lowercase();
    if name == "title" {
        return Some(1);
    }
    let level: u8 = name.strip_prefix("heading ")?.trim().parse().ok()?;
    (1..=9).contains(&level).then_some(level)
}

fn join_cells(cells: impl Iterator<Item = impl AsRef<str>>, separator: &str) -> String {
    let cells: Vec<String> = cells
        .filter(|cell| !cell.as_ref().is_empty())
        .map(|cell| cell.as_ref().to_owned())
        .collect();
    cells.join(separator)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|&cell| cell.to_owned()).collect()
    }

    #[test]
    fn blocks_are_separated_by_blank_lines_and_headings_point_at_their_line() {
        let mut outline = Outline::default();
        outline.heading(1, "  Fares \n");
        outline.paragraph("Prices  are\tper person.\n\n  \nChildren travel free.");
        outline.heading(9, "Notes");
        outline.paragraph("   ");
        outline.heading(2, " ");
        let (text, headings) = outline.finish();
        assert_eq!(
            text,
            "Fares\n\nPrices are per person.\nChildren travel free.\n\nNotes"
        );
        let found: Vec<(usize, u8, &str)> = headings
            .iter()
            .map(|h| (h.offset, h.level, h.title.as_str()))
            .collect();
        assert_eq!(found, [(0, 1, "Fares"), (53, 6, "Notes")]);
    }

    #[test]
    fn table_rows_name_their_columns_and_skip_empty_cells() {
        let mut outline = Outline::default();
        outline.table(&[
            row(&["", "", ""]),
            row(&["Vehicle", "Single", ""]),
            row(&["Kayak", "8 euros", "bring a strap"]),
            row(&["Car", "", ""]),
            row(&["", "", ""]),
        ]);
        assert_eq!(
            outline.finish().0,
            "Vehicle | Single\nVehicle: Kayak; Single: 8 euros; bring a strap\nVehicle: Car"
        );
    }

    #[test]
    fn sections_keep_their_headings_at_shifted_offsets() {
        let mut outline = Outline::default();
        outline.paragraph("Front matter");
        outline.section(
            "Arrival\n\nThe boat docks.",
            vec![Heading {
                offset: 0,
                level: 1,
                title: "Arrival".into(),
            }],
        );
        let (text, headings) = outline.finish();
        assert_eq!(&text[headings[0].offset..][..7], "Arrival");
    }
}
