//! Word documents (`.docx`): paragraphs and tables in reading order, headings from paragraph
//! styles (their outline level, or a `heading N` name) and from direct outline levels.

use std::collections::HashMap;

use roxmltree::Node;

use super::outline::{Outline, level_from_style_name};
use super::zipped::{self, Archive, TableNames, attribute, is, nodes_outside, parse_xml, walk};
use super::{Heading, LoadError};

const KIND: &str = "Word";

pub(super) fn to_text(bytes: &[u8], limit: u64) -> Result<(String, Vec<Heading>), LoadError> {
    let mut archive = Archive::open(bytes, KIND, limit)?;
    let document = archive.required_text("word/document.xml")?;
    let styles = archive.text("word/styles.xml")?.unwrap_or_default();
    let levels = if styles.is_empty() {
        HashMap::new()
    } else {
        heading_styles(&styles)?
    };
    body_text(&document, &levels)
}

/// The text of `word/document.xml`, with `levels` mapping style ids to heading levels.
fn body_text(xml: &str, levels: &HashMap<String, u8>) -> Result<(String, Vec<Heading>), LoadError> {
    let document = parse_xml(xml, KIND)?;
    let mut outline = Outline::default();
    // The state passed down: inside a paragraph. Paragraphs inside a table belong to its
    // cells; those of a text box to its anchor's.
    walk(document.root(), false, |node, in_paragraph| {
        if is(node, "tbl") {
            outline.table(&table_rows(node));
            return None;
        }
        if is(node, "p") && !in_paragraph {
            let text = paragraph_text(node);
            match heading_level(node, levels) {
                Some(level) => outline.heading(level, &text),
                None => outline.paragraph(&text),
            }
        }
        Some(in_paragraph || is(node, "p"))
    });
    Ok(outline.finish())
}

/// A paragraph's visible text: its runs' text, tabs and breaks, without deleted revisions or
/// field instructions (which live in other elements than `w:t`).
fn paragraph_text(paragraph: Node) -> String {
    let mut text = String::new();
    // A paragraph nested in this one (a text box's) is not part of its text.
    for node in nodes_outside(paragraph, |node| is(node, "p")) {
        match node.tag_name().name() {
            "t" if node.is_element() => text.push_str(node.text().unwrap_or_default()),
            "tab" if node.is_element() => text.push('\t'),
            "br" | "cr" if node.is_element() => text.push('\n'),
            _ => {}
        }
    }
    text
}

/// The rows of a table, each cell's paragraphs joined by spaces.
fn table_rows(table: Node) -> Vec<Vec<String>> {
    let names = TableNames {
        table: "tbl",
        row: "tr",
        cell: "tc",
        paragraphs: &["p"],
    };
    zipped::table_rows(table, &names, paragraph_text)
}

/// The paragraph's heading level: its own outline level, else its style's.
fn heading_level(paragraph: Node, levels: &HashMap<String, u8>) -> Option<u8> {
    let properties = paragraph.children().find(|n| is(*n, "pPr"))?;
    if let Some(level) = properties
        .children()
        .find(|n| is(*n, "outlineLvl"))
        .and_then(outline_level)
    {
        return Some(level);
    }
    let style = properties.children().find(|n| is(*n, "pStyle"))?;
    levels.get(attribute(style, "val")?).copied()
}

/// Heading levels of the paragraph styles in `word/styles.xml`, by style id: a style's own
/// outline level, else a `heading N` or `Title` name, else what the style it is based on has.
fn heading_styles(xml: &str) -> Result<HashMap<String, u8>, LoadError> {
    let document = parse_xml(xml, KIND)?;
    let mut own = HashMap::new();
    let mut based_on = HashMap::new();
    for style in document.descendants().filter(|n| is(*n, "style")) {
        let Some(id) = attribute(style, "styleId") else {
            continue;
        };
        let child = |name: &str| style.children().find(|n| is(*n, name));
        let outline = child("pPr")
            .and_then(|p| p.children().find(|n| is(*n, "outlineLvl")))
            .and_then(outline_level);
        let named = child("name")
            .and_then(|n| attribute(n, "val"))
            .and_then(level_from_style_name);
        if let Some(level) = outline.or(named) {
            own.insert(id.to_owned(), level);
        }
        if let Some(parent) = child("basedOn").and_then(|n| attribute(n, "val")) {
            based_on.insert(id.to_owned(), parent.to_owned());
        }
    }
    let mut levels = own.clone();
    for id in based_on.keys() {
        // Walking up the chain, bounded so that a cycle cannot hang the reader.
        let mut current = id;
        for _ in 0..16 {
            if let Some(&level) = own.get(current) {
                levels.entry(id.clone()).or_insert(level);
                break;
            }
            match based_on.get(current) {
                Some(parent) => current = parent,
                None => break,
            }
        }
    }
    Ok(levels)
}

/// `w:outlineLvl`'s 0-based value as a heading level; 9 means body text.
fn outline_level(node: Node) -> Option<u8> {
    let level: u8 = attribute(node, "val")?.parse().ok()?;
    (level < 9).then_some(level + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;

    fn body(inner: &str) -> String {
        format!("<w:document {W}><w:body>{inner}</w:body></w:document>")
    }

    fn styles() -> HashMap<String, u8> {
        heading_styles(&format!(
            r#"<w:styles {W}>
              <w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style>
              <w:style w:type="paragraph" w:styleId="Berschrift2"><w:name w:val="Überschrift 2"/>
                <w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style>
              <w:style w:type="paragraph" w:styleId="Chapter"><w:basedOn w:val="Heading1"/></w:style>
              <w:style w:type="paragraph" w:styleId="Loop"><w:basedOn w:val="Loop"/></w:style>
            </w:styles>"#
        ))
        .unwrap()
    }

    #[test]
    fn styles_give_levels_by_name_outline_level_and_inheritance() {
        let levels = styles();
        assert_eq!(levels["Heading1"], 1);
        assert_eq!(levels["Berschrift2"], 2);
        assert_eq!(levels["Chapter"], 1);
        assert!(!levels.contains_key("Loop"));
    }

    #[test]
    fn paragraphs_headings_and_tables_in_reading_order() {
        let xml = body(
            r#"<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Fares</w:t></w:r></w:p>
            <w:p><w:r><w:t xml:space="preserve">Prices &amp; </w:t></w:r>
                 <w:del><w:r><w:delText>old</w:delText></w:r></w:del>
                 <w:r><w:tab/><w:t>rules</w:t><w:br/><w:t>apply.</w:t></w:r></w:p>
            <w:tbl>
              <w:tr><w:tc><w:p><w:r><w:t>Vehicle</w:t></w:r></w:p></w:tc>
                    <w:tc><w:p><w:r><w:t>Return</w:t></w:r></w:p></w:tc></w:tr>
              <w:tr><w:tc><w:p><w:r><w:t>Kayak</w:t></w:r></w:p></w:tc>
                    <w:tc><w:p><w:r><w:t>16</w:t></w:r></w:p><w:p><w:r><w:t>euros</w:t></w:r></w:p></w:tc></w:tr>
            </w:tbl>
            <w:p><w:pPr><w:outlineLvl w:val="1"/></w:pPr><w:r><w:t>Timetable</w:t></w:r></w:p>"#,
        );
        let (text, headings) = body_text(&xml, &styles()).unwrap();
        assert_eq!(
            text,
            "Fares\n\nPrices & rules\napply.\n\nVehicle | Return\nVehicle: Kayak; Return: 16 euros\n\nTimetable"
        );
        let titles: Vec<(u8, &str)> = headings
            .iter()
            .map(|h| (h.level, h.title.as_str()))
            .collect();
        assert_eq!(titles, [(1, "Fares"), (2, "Timetable")]);
    }

    /// Runs and content controls nested tens of thousands deep (a file of a few kilobytes)
    /// are read in one pass, with no walk up the ancestors from each node.
    #[test]
    fn deeply_nested_markup_is_read() {
        let w = "xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"";
        let runs = format!(
            "<w:p>{}<w:t>deep</w:t>{}</w:p>",
            "<w:r>".repeat(80_000),
            "</w:r>".repeat(80_000)
        );
        let controls = format!(
            "{}<w:p><w:r><w:t>inside</w:t></w:r></w:p>{}",
            "<w:sdt><w:sdtContent>".repeat(20_000),
            "</w:sdtContent></w:sdt>".repeat(20_000)
        );
        let xml = format!("<w:document {w}><w:body>{runs}{controls}</w:body></w:document>");
        let (text, _) = body_text(&xml, &HashMap::new()).unwrap();
        assert_eq!(text, "deep\n\ninside");
    }

    #[test]
    fn a_document_without_its_body_part_is_corrupt() {
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        zip.start_file("word/other.xml", zip::write::SimpleFileOptions::default())
            .unwrap();
        let bytes = zip.finish().unwrap().into_inner();
        let error = to_text(&bytes, 1 << 20).unwrap_err();
        assert_eq!(
            scar_core::ErrorChain(&error).to_string(),
            "corrupt Word file: it has no word/document.xml"
        );
    }

    #[test]
    fn parts_that_inflate_past_the_limit_are_refused() {
        use std::io::Write;
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let deflated = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        zip.start_file("word/document.xml", deflated).unwrap();
        zip.write_all(&vec![b' '; 4 << 20]).unwrap();
        let bytes = zip.finish().unwrap().into_inner();
        assert!(bytes.len() < 64 * 1024, "{} bytes", bytes.len());
        let error = to_text(&bytes, 1 << 20).unwrap_err();
        assert!(
            matches!(error, LoadError::InflatesTooLarge { limit } if limit == 1 << 20),
            "{error:?}"
        );
    }
}
