//! E-books (`.epub`): the chapters in the spine's reading order, each read as HTML, headed by
//! its own headings or, when it has none, by its title.

use super::outline::Outline;
use super::zipped::{Archive, attribute, corrupt, folder, is, parse_xml, resolve};
use super::{Heading, LoadError, html};

const KIND: &str = "EPUB";

pub(super) fn to_text(bytes: &[u8], limit: u64) -> Result<(String, Vec<Heading>), LoadError> {
    let mut archive = Archive::open(bytes, KIND, limit)?;
    let container = archive.required_text("META-INF/container.xml")?;
    let package_path = parse_xml(&container, KIND)?
        .descendants()
        .find(|node| is(*node, "rootfile"))
        .and_then(|node| attribute(node, "full-path"))
        .map(str::to_owned)
        .ok_or_else(|| corrupt(KIND, "its container names no package file"))?;
    let package = archive.required_text(&package_path)?;
    let mut outline = Outline::default();
    for chapter in spine(&package, folder(&package_path))? {
        let Some(xhtml) = archive.text(&chapter)? else {
            continue;
        };
        let (text, headings) = html::to_text(body_of(&xhtml));
        if headings.is_empty()
            && let Some(title) = title_of(&xhtml)
        {
            outline.heading(1, &title);
        }
        outline.section(&text, headings);
    }
    Ok(outline.finish())
}

/// The archive paths of the spine's documents, in reading order, leaving out the navigation
/// document (the table of contents, which repeats the chapter titles).
fn spine(package: &str, base: &str) -> Result<Vec<String>, LoadError> {
    let document = parse_xml(package, KIND)?;
    let items: Vec<(&str, &str, &str)> = document
        .descendants()
        .filter(|node| is(*node, "item"))
        .filter_map(|node| {
            Some((
                attribute(node, "id")?,
                attribute(node, "href")?,
                attribute(node, "properties").unwrap_or_default(),
            ))
        })
        .collect();
    Ok(document
        .descendants()
        .filter(|node| is(*node, "itemref"))
        .filter_map(|node| attribute(node, "idref"))
        .filter_map(|idref| items.iter().find(|(id, _, _)| *id == idref))
        .filter(|(_, _, properties)| !properties.split_whitespace().any(|p| p == "nav"))
        .map(|(_, href, _)| resolve(base, href))
        .collect())
}

/// The part of an XHTML document from its `<body>` on: its `<head>`'s title is not its text.
fn body_of(xhtml: &str) -> &str {
    let lower = xhtml.to_ascii_lowercase();
    lower.find("<body").map_or(xhtml, |start| &xhtml[start..])
}

fn title_of(xhtml: &str) -> Option<String> {
    let lower = xhtml.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let (title, _) = html::to_text(&xhtml[start..end]);
    (!title.trim().is_empty()).then_some(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spine_orders_chapters_and_leaves_out_the_navigation() {
        let package = r#"<package xmlns="http://www.idpf.org/2007/opf" version="3.0">
          <manifest>
            <item id="nav" href="nav.xhtml" properties="nav" media-type="application/xhtml+xml"/>
            <item id="c2" href="text/harbour%20walk.xhtml" media-type="application/xhtml+xml"/>
            <item id="c1" href="text/arrival.xhtml" media-type="application/xhtml+xml"/>
          </manifest>
          <spine><itemref idref="nav"/><itemref idref="c1"/><itemref idref="c2"/></spine>
        </package>"#;
        assert_eq!(
            spine(package, "OEBPS").unwrap(),
            ["OEBPS/text/arrival.xhtml", "OEBPS/text/harbour walk.xhtml"]
        );
    }

    #[test]
    fn a_chapter_reads_from_its_body_and_falls_back_on_its_title() {
        let xhtml = "<?xml version='1.0'?><html><head><title>The Old Harbour</title></head>\
                     <body><p>Boats  rest here.</p></body></html>";
        assert_eq!(title_of(xhtml).as_deref(), Some("The Old Harbour"));
        assert_eq!(html::to_text(body_of(xhtml)).0, "Boats rest here.");
    }
}
