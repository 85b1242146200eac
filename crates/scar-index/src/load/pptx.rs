//! PowerPoint decks (`.pptx`): one section per slide in the deck's order, headed by the slide's
//! title, with its text boxes, tables and speaker notes.

use roxmltree::Node;

use super::outline::Outline;
use super::zipped::{
    Archive, TableNames, attribute, folder, is, nodes_outside, parse_xml, relationships, resolve,
    table_rows, walk,
};
use super::{Heading, LoadError};

const KIND: &str = "PowerPoint";
const PRESENTATION: &str = "ppt/presentation.xml";

pub(super) fn to_text(bytes: &[u8], limit: u64) -> Result<(String, Vec<Heading>), LoadError> {
    let mut archive = Archive::open(bytes, KIND, limit)?;
    let mut outline = Outline::default();
    for (number, slide_path) in (1..).zip(slide_paths(&mut archive)?) {
        let Some(slide) = archive.text(&slide_path)? else {
            continue;
        };
        let shapes = shapes(&slide)?;
        let title = shapes
            .iter()
            .find(|shape| shape.is_title)
            .map_or_else(|| format!("Slide {number}"), |shape| shape.text.join(" "));
        outline.heading(1, &title);
        for shape in shapes.iter().filter(|shape| !shape.is_title) {
            match &shape.table {
                Some(rows) => outline.table(rows),
                None => outline.paragraph(&shape.text.join("\n")),
            }
        }
        if let Some(notes) = notes_of(&mut archive, &slide_path)?.filter(|n| !n.trim().is_empty()) {
            outline.heading(2, "Speaker notes");
            outline.paragraph(&notes);
        }
    }
    Ok(outline.finish())
}

/// The slides' parts in the deck's order, as `ppt/presentation.xml` lists them.
fn slide_paths(archive: &mut Archive) -> Result<Vec<String>, LoadError> {
    let presentation = archive.required_text(PRESENTATION)?;
    let links = relationships(
        &archive.required_text("ppt/_rels/presentation.xml.rels")?,
        KIND,
    )?;
    let document = parse_xml(&presentation, KIND)?;
    Ok(document
        .descendants()
        .filter(|node| is(*node, "sldId"))
        .filter_map(relationship_id)
        .filter_map(|id| links.iter().find(|link| link.id == id))
        .map(|link| resolve(folder(PRESENTATION), &link.target))
        .collect())
}

/// The `r:id` of a slide id entry (its plain `id` attribute is a number, not the link).
fn relationship_id<'x>(node: Node<'x, '_>) -> Option<&'x str> {
    node.attributes()
        .find(|a| a.name() == "id" && a.namespace().is_some())
        .map(|a| a.value())
}

/// One shape on a slide: its paragraphs, or its table's rows.
struct Shape {
    is_title: bool,
    text: Vec<String>,
    table: Option<Vec<Vec<String>>>,
}

/// The shapes of a slide (or notes) part in drawing order, those with no text left out.
fn shapes(xml: &str) -> Result<Vec<Shape>, LoadError> {
    let document = parse_xml(xml, KIND)?;
    let mut shapes = Vec::new();
    walk(document.root(), (), |node, ()| {
        if is(node, "sp") {
            let placeholder = node
                .descendants()
                .find(|n| is(*n, "ph"))
                .and_then(|ph| attribute(ph, "type"));
            // Slide numbers, dates and footers repeat on every slide and say nothing.
            if matches!(placeholder, Some("sldNum" | "dt" | "ftr" | "hdr")) {
                return None;
            }
            let text: Vec<String> = nodes_outside(node, |n| is(n, "tbl"))
                .into_iter()
                .filter(|p| is(*p, "p"))
                .map(paragraph_text)
                .filter(|line| !line.trim().is_empty())
                .collect();
            if !text.is_empty() {
                shapes.push(Shape {
                    is_title: matches!(placeholder, Some("title" | "ctrTitle")),
                    text,
                    table: None,
                });
            }
            None
        } else if is(node, "tbl") {
            let names = TableNames {
                table: "tbl",
                row: "tr",
                cell: "tc",
                paragraphs: &["p"],
            };
            let rows = table_rows(node, &names, paragraph_text);
            shapes.push(Shape {
                is_title: false,
                text: Vec::new(),
                table: Some(rows),
            });
            None
        } else {
            Some(())
        }
    });
    Ok(shapes)
}

/// A DrawingML paragraph's text runs, with its line breaks.
fn paragraph_text(paragraph: Node) -> String {
    let mut text = String::new();
    for node in paragraph.descendants().filter(Node::is_element) {
        match node.tag_name().name() {
            "t" => text.push_str(node.text().unwrap_or_default()),
            "br" => text.push('\n'),
            _ => {}
        }
    }
    text
}

/// The speaker notes of the slide at `slide_path`: the body placeholder of its notes part.
fn notes_of(archive: &mut Archive, slide_path: &str) -> Result<Option<String>, LoadError> {
    let (slides, name) = slide_path.rsplit_once('/').unwrap_or(("", slide_path));
    let Some(links) = archive.text(&format!("{slides}/_rels/{name}.rels"))? else {
        return Ok(None);
    };
    let Some(notes) = relationships(&links, KIND)?
        .into_iter()
        .find(|link| link.kind.ends_with("/notesSlide"))
    else {
        return Ok(None);
    };
    let Some(xml) = archive.text(&resolve(slides, &notes.target))? else {
        return Ok(None);
    };
    let document = parse_xml(&xml, KIND)?;
    let body = document.descendants().filter(|n| is(*n, "sp")).find(|sp| {
        sp.descendants()
            .find(|n| is(*n, "ph"))
            .is_some_and(|ph| attribute(ph, "type") == Some("body"))
    });
    Ok(body.map(|body| {
        body.descendants()
            .filter(|p| is(*p, "p"))
            .map(paragraph_text)
            .collect::<Vec<_>>()
            .join("\n")
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slide_shapes_keep_titles_text_and_tables_without_repeated_furniture() {
        let xml = r#"<p:sld xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"
                 xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><p:cSld><p:spTree>
            <p:sp><p:nvSpPr><p:nvPr><p:ph type="title"/></p:nvPr></p:nvSpPr>
              <p:txBody><a:p><a:r><a:t>Lighthouse</a:t></a:r></a:p></p:txBody></p:sp>
            <p:sp><p:nvSpPr><p:nvPr><p:ph idx="1"/></p:nvPr></p:nvSpPr>
              <p:txBody><a:p><a:r><a:t>Restoration </a:t></a:r><a:r><a:t>budget</a:t></a:r></a:p>
                <a:p><a:r><a:t>Works start in May</a:t></a:r></a:p></p:txBody></p:sp>
            <p:sp><p:nvSpPr><p:nvPr><p:ph type="sldNum"/></p:nvPr></p:nvSpPr>
              <p:txBody><a:p><a:r><a:t>2</a:t></a:r></a:p></p:txBody></p:sp>
            <p:graphicFrame><a:graphic><a:graphicData><a:tbl>
              <a:tr><a:tc><a:txBody><a:p><a:r><a:t>Item</a:t></a:r></a:p></a:txBody></a:tc>
                    <a:tc><a:txBody><a:p><a:r><a:t>Cost</a:t></a:r></a:p></a:txBody></a:tc></a:tr>
              <a:tr><a:tc><a:txBody><a:p><a:r><a:t>Lamp</a:t></a:r></a:p></a:txBody></a:tc>
                    <a:tc><a:txBody><a:p><a:r><a:t>9,000</a:t></a:r></a:p></a:txBody></a:tc></a:tr>
            </a:tbl></a:graphicData></a:graphic></p:graphicFrame>
          </p:spTree></p:cSld></p:sld>"#;
        let shapes = shapes(xml).unwrap();
        assert_eq!(shapes.len(), 3);
        assert!(shapes[0].is_title);
        assert_eq!(shapes[0].text, ["Lighthouse"]);
        assert_eq!(shapes[1].text, ["Restoration budget", "Works start in May"]);
        assert_eq!(
            shapes[2].table.as_deref(),
            Some(
                &[
                    vec!["Item".to_owned(), "Cost".to_owned()],
                    vec!["Lamp".to_owned(), "9,000".to_owned()]
                ][..]
            )
        );
    }
}
