//! OpenDocument text (`.odt`): headings (`text:h` with their outline level), paragraphs, lists
//! and tables in reading order.

use roxmltree::Node;

use super::outline::Outline;
use super::zipped::{self, Archive, TableNames, attribute, is, nodes_outside, parse_xml, walk};
use super::{Heading, LoadError};

const KIND: &str = "OpenDocument text";

pub(super) fn to_text(bytes: &[u8], limit: u64) -> Result<(String, Vec<Heading>), LoadError> {
    let mut archive = Archive::open(bytes, KIND, limit)?;
    body_text(&archive.required_text("content.xml")?)
}

fn body_text(xml: &str) -> Result<(String, Vec<Heading>), LoadError> {
    let document = parse_xml(xml, KIND)?;
    let mut outline = Outline::default();
    // Nothing inside a heading, paragraph or table is placed on its own: a table's paragraphs
    // belong to its cells. A note's are not part of the running text.
    walk(document.root(), (), |node, ()| {
        if is(node, "h") {
            let level = attribute(node, "outline-level")
                .and_then(|level| level.parse().ok())
                .unwrap_or(1);
            outline.heading(level, &paragraph_text(node));
        } else if is(node, "p") {
            outline.paragraph(&paragraph_text(node));
        } else if is(node, "table") {
            outline.table(&table_rows(node));
        } else if !(is(node, "note") || is(node, "annotation")) {
            return Some(());
        }
        None
    });
    Ok(outline.finish())
}

/// A paragraph's text: its spans and links, `text:s` runs of spaces, tabs and line breaks,
/// without the notes anchored in it.
fn paragraph_text(paragraph: Node) -> String {
    let mut text = String::new();
    let in_notes = |node: Node| is(node, "note") || is(node, "annotation");
    for node in nodes_outside(paragraph, in_notes) {
        if in_notes(node) {
            continue;
        }
        if node.is_text() {
            text.push_str(node.text().unwrap_or_default());
            continue;
        }
        match node.tag_name().name() {
            "s" if node.is_element() => {
                let count = attribute(node, "c")
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(1);
                text.extend(std::iter::repeat_n(' ', count.min(64)));
            }
            "tab" if node.is_element() => text.push('\t'),
            "line-break" if node.is_element() => text.push('\n'),
            _ => {}
        }
    }
    text
}

/// A table's rows (header rows included, in order), each cell's paragraphs joined by spaces.
fn table_rows(table: Node) -> Vec<Vec<String>> {
    let names = TableNames {
        table: "table",
        row: "table-row",
        cell: "table-cell",
        paragraphs: &["p", "h"],
    };
    zipped::table_rows(table, &names, paragraph_text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spans nested tens of thousands deep are read in one pass.
    #[test]
    fn deeply_nested_spans_are_read() {
        let xml = format!(
            r#"<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text><text:p>{}deep{}</text:p></office:text></office:body></office:document-content>"#,
            "<text:span>".repeat(80_000),
            "</text:span>".repeat(80_000)
        );
        let (text, _) = body_text(&xml).unwrap();
        assert_eq!(text, "deep");
    }

    #[test]
    fn headings_paragraphs_lists_and_tables_in_reading_order() {
        let xml = r#"<office:document-content
            xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
            xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
            xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0">
          <office:body><office:text>
            <text:h text:outline-level="1">Opening hours</text:h>
            <text:p>The reading room<text:s text:c="3"/>opens <text:span>daily</text:span>.<text:note><text:note-citation>1</text:note-citation><text:note-body><text:p>Except holidays.</text:p></text:note-body></text:note></text:p>
            <text:list><text:list-item><text:p>Bring a card.</text:p></text:list-item></text:list>
            <table:table table:name="Hours">
              <table:table-header-rows><table:table-row>
                <table:table-cell><text:p>Day</text:p></table:table-cell>
                <table:table-cell><text:p>Closes</text:p></table:table-cell>
              </table:table-row></table:table-header-rows>
              <table:table-row>
                <table:table-cell><text:p>Saturday</text:p></table:table-cell>
                <table:table-cell><text:p>13:00</text:p></table:table-cell>
              </table:table-row>
            </table:table>
            <text:h text:outline-level="2">Loans</text:h>
          </office:text></office:body></office:document-content>"#;
        let (text, headings) = body_text(xml).unwrap();
        assert_eq!(
            text,
            "Opening hours\n\nThe reading room opens daily.\n\nBring a card.\n\n\
             Day | Closes\nDay: Saturday; Closes: 13:00\n\nLoans"
        );
        let titles: Vec<(u8, &str)> = headings
            .iter()
            .map(|h| (h.level, h.title.as_str()))
            .collect();
        assert_eq!(titles, [(1, "Opening hours"), (2, "Loans")]);
    }
}
